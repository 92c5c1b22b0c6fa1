package core

import (
	"context"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/internal/ratelog"
	"github.com/tollgate/tollgate/internal/storeflags"
)

// A Limiter applies a set of limits, kept in a Store, to keys. It is safe
// for concurrent use; its methods are thin: the Store does the work
// atomically, so any number of Limiters, in any number of processes, can
// share one Store's keys.
type Limiter struct {
	store    Store
	limits   []Limit
	plan     *engine.Plan // the limits compiled; nil when there are none
	limitsFn func(ctx context.Context, key string) []Limit
	plans    plans // WithLimitsFunc's limits compiled (plans.go)
	clock    Clock
	scope    string // the scope of every plan
	name     string // in logs and observations: WithName, or readable from the limits
	named    bool   // scope set by WithName

	// Failure handling (policy.go, breaker.go); unused when the store is
	// InProcess.
	inProcess   bool
	timeout     time.Duration
	policy      FailurePolicy
	fbLimits    []Limit      // Fallback with FleetSize: the share of each of the limits
	fbPlan      *engine.Plan // and their plan
	fbShares    sync.Map     // the same for WithLimitsFunc's plans: *engine.Plan → *fleetShare (policy.go)
	fbSharesN   atomic.Int64 // entries of fbShares, at most maxPlans
	hook        func(ctx context.Context, key string, err error)
	breakerConf Breaker
	breakers    *breakers // nil: off, or InProcess

	// Observation (observer.go, log.go).
	obs Observer        // nil: none
	log *ratelog.Logger // never nil

	deny *denyCache // WithDenyCache; nil: off

	// direct is set when AllowN may go straight to the store (take): one
	// plan for every key, an InProcess store, the store's clock, and no
	// observer or deny cache.
	direct bool
	// taker is the store when l.direct, l has one limit and the store
	// has a TakeBrief (see Store); nil otherwise.
	taker taker
	// lends is set when the store is InProcess and a
	// storeflags.OnceApplier: an op of several limits then brings the
	// memory of their parts (engine.Op.Parts, from partsPool), which no
	// other store is trusted with.
	lends bool
}

// taker is the optional method of a Store described in Store's doc.
type taker interface {
	TakeBrief(ctx context.Context, plan *engine.Plan, key string, cost int64) (allowed bool, remaining, reset, wait, window, lease, at int64, err error)
}

// An Option configures a Limiter. Every Limit is an Option that adds itself
// to the Limiter's limits.
type Option interface {
	applyLimiter(*Limiter) error
}

type optionFunc func(*Limiter) error

func (f optionFunc) applyLimiter(l *Limiter) error { return f(l) }

func (lim Limit) applyLimiter(l *Limiter) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	if lim.Name == "" {
		lim.Name = lim.PolicyName()
	}
	l.limits = append(l.limits, lim)
	return nil
}

// WithLimitsFunc chooses the limits per key, for plans and tiers: fn is
// called on every operation, and its limits replace the Limiter's own; when
// it returns none, the Limiter's own apply, and with none of its own the
// operation fails with an error matching ErrInvalidOp, logged at ERROR as
// below: none is not "unlimited". Limits it returns are validated
// on every call and an invalid one fails the operation, with a
// configuration error logged at ERROR naming the Limiter (WithLogger; a
// line per interval). Their names must differ, as New's do: two limits
// named alike on purpose are such an error; unnamed limits whose derived
// names collide (PerMinute(10) and PerMinute(10).WithAlgorithm(GCRA)) are
// named apart instead, the first keeping its PolicyName and each later one
// taking its algorithm's name as a suffix ("10-per-1m-gcra"), and its
// place in the set, from 1, when that is not enough
// ("10-per-1s-sliding-window-3"). Name them, or the RateLimit headers
// derive a name on every request. fn must not be nil. Default: none.
func WithLimitsFunc(fn func(ctx context.Context, key string) []Limit) Option {
	return optionFunc(func(l *Limiter) error {
		if fn == nil {
			return fmt.Errorf("%w: WithLimitsFunc(nil)", ErrInvalidOption)
		}
		l.limitsFn = fn
		return nil
	})
}

// WithClock makes the Limiter pass clock's time with every operation, in
// place of the store's own clock (the Redis store's default is Redis TIME).
// Tests pass a fake clock. clock must not be nil. Default: the store's
// clock.
func WithClock(clock Clock) Option {
	return optionFunc(func(l *Limiter) error {
		if clock == nil {
			return fmt.Errorf("%w: WithClock(nil)", ErrInvalidOption)
		}
		l.clock = clock
		return nil
	})
}

// New returns a Limiter of store with the limits and options given. Store
// failures go to a failure policy (WithFailurePolicy, WithTimeout,
// WithBreaker, WithErrorHook; see FailurePolicy). It returns an error
// wrapping ErrInvalidLimit for an invalid limit, ErrInvalidOption for an
// invalid option (a nil function given to one among them; a nil Option is
// skipped), and an error when store is nil or there are neither limits nor
// a WithLimitsFunc. Two limits of one name, given or derived
// (PerMinute(10) twice, or beside PerMinute(10).WithAlgorithm(GCRA)), are
// an invalid limit: name one of them (Limit.Named).
func New(store Store, opts ...Option) (*Limiter, error) {
	if isNil(store) {
		return nil, fmt.Errorf("%w: New: nil store", ErrInvalidOption)
	}
	_, inProcess := store.(InProcess)
	_, once := store.(storeflags.OnceApplier)
	l := &Limiter{store: store, inProcess: inProcess, lends: inProcess && once, timeout: DefaultTimeout, log: ratelog.New(nil)}
	for _, o := range opts {
		if o == nil {
			continue // a nil Option adds nothing: New(store, lim, maybe) with maybe unset
		}
		if err := o.applyLimiter(l); err != nil {
			return nil, err // already says what and which limit
		}
	}
	if err := distinctNames(l.limits); err != nil {
		return nil, err
	}
	if len(l.limits) == 0 && l.limitsFn == nil {
		return nil, fmt.Errorf("%w: New needs at least one Limit or a WithLimitsFunc", ErrInvalidOp)
	}
	if !l.named {
		l.scope, l.name = defaultScope(l.limits), defaultName(l.limits)
	}
	if len(l.limits) > 0 {
		var err error
		if l.plan, err = compilePlan(l.scope, l.limits); err != nil {
			return nil, err
		}
		if l.policy.mode == failFallback && l.policy.fleet > 1 {
			l.fbLimits = shareOf(l.limits, l.policy.fleet)
			if l.fbPlan, err = compilePlan(l.scope, l.fbLimits); err != nil {
				return nil, err
			}
		}
	}
	if !l.inProcess && !l.breakerConf.Disabled {
		l.breakers = newBreakers(l.breakerConf, l.timeout, store, l.breakerChanged)
	}
	if l.deny != nil {
		l.deny.grace = l.timeout
	}
	l.direct = l.plan != nil && l.limitsFn == nil && l.inProcess && l.clock == nil && l.obs == nil && l.deny == nil
	if t, ok := store.(taker); ok && l.direct && len(l.limits) == 1 {
		l.taker = t // one limit: decide needs no Result.Limits
	}
	return l, nil
}

// isNil reports whether s is nil, or an interface holding a nil pointer
// (a typed nil, such as a nil *memstore.Store).
func isNil(s Store) bool {
	if s == nil {
		return true
	}
	v := reflect.ValueOf(s)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// WithName names the Limiter. The name is its scope (Op.Scope): Limiters
// sharing a store keep separate state for the same key unless they have
// the same scope, so a fleet's processes share a Limiter's keys by giving
// it the same name, or the same limits. It must be printable ASCII, at most
// MaxNameLen bytes. Default: derived from the Limiter's limits (their
// algorithm, quota, period, burst, precision, name and unit), so that Limiters
// configured alike share keys and others do not; a Limiter with only a
// WithLimitsFunc has the empty scope.
func WithName(name string) Option {
	return optionFunc(func(l *Limiter) error {
		if len(name) > MaxNameLen || !isPrintableASCII(name) {
			return fmt.Errorf("%w: limiter name %.64q is not printable ASCII of at most %d bytes", ErrInvalidOp, name, MaxNameLen)
		}
		l.scope, l.name, l.named = name, name, true
		return nil
	})
}

// Name returns the Limiter's name, as logs and observers (metrics' limiter
// label) show it: its WithName, or else its limits' names joined with "+",
// such as "100-per-1m+1000-per-1h" (see Limit.PolicyName); "" for a
// Limiter with only a WithLimitsFunc. Without WithName the store keeps the
// Limiter's state under Scope, not Name.
func (l *Limiter) Name() string { return l.name }

// Scope returns the scope under which the store keeps the Limiter's state
// (Op.Scope): its WithName, or else a digest of its limits' definitions
// (see WithName). Two Limiters on one store share a key's state when their
// scopes are equal.
func (l *Limiter) Scope() string { return l.scope }

// defaultName is the Name of a Limiter of limits without a WithName: their
// names (each set, by New, to its PolicyName when empty) joined with "+".
func defaultName(limits []Limit) string {
	var b strings.Builder
	for i, lim := range limits {
		if i > 0 {
			b.WriteByte('+')
		}
		b.WriteString(lim.PolicyName())
	}
	return b.String()
}

// defaultScope derives a scope from limits: a digest of their definitions,
// the same in every process configured alike.
func defaultScope(limits []Limit) string {
	if len(limits) == 0 {
		return ""
	}
	h := fnv.New64a()
	for _, lim := range limits {
		fmt.Fprintf(h, "%d/%d/%d/%d/%d/%q", lim.Algorithm, lim.Quota, lim.Period, lim.Burst, lim.Precision, lim.Name)
		if lim.Unit != "" { // absent from the digests of limits without a unit, which stay as they were
			fmt.Fprintf(h, "/%q", lim.Unit)
		}
		h.Write([]byte{';'})
	}
	return "l" + strconv.FormatUint(h.Sum64(), 36)
}

// Store returns the Limiter's store.
func (l *Limiter) Store() Store { return l.store }

// Limits returns the limits that apply to key: WithLimitsFunc's, or the
// Limiter's own.
func (l *Limiter) Limits(ctx context.Context, key string) []Limit {
	if l.limitsFn != nil {
		if ls := l.limitsFn(ctx, key); len(ls) > 0 {
			return ls
		}
	}
	return l.limits
}

// Allow is shorthand for AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (d Decision, err error) {
	err = l.allowInto(ctx, key, 1, &d)
	return d, err
}

// AllowN takes cost units from every limit of key if all of them admit it,
// and nothing otherwise. A cost above a limit's capacity is denied with
// RetryAfter Never. Being denied is not an error; an error means invalid
// input (a negative cost, an empty key) or a failing store.
func (l *Limiter) AllowN(ctx context.Context, key string, cost int64) (d Decision, err error) {
	err = l.allowInto(ctx, key, cost, &d)
	return d, err
}

// allowInto is AllowN writing to d, which is zero but for the States
// memory AllowNInto brings to the direct path: small enough that Allow
// and AllowN are inlined, and their caller's Decision is written in place.
//
// With a taker (one limit, straight to an in-process store), it decides
// through the store's TakeBrief itself, a level of calls fewer than
// through take: its lines after the call are decide's, written out for
// the fields the store returns in registers. A helper shared with decide
// is not inlined, and its call cost 6% of a decision; an engine.Brief
// (seven words, more than the compiler keeps in registers) would be
// spilled and copied, and the copy stalls on reading back the spill.
// TestTheDirectPathDecidesAsTheGeneralOne holds this path to a Limiter's
// general one (l.do): the same Decisions, errors and every algorithm
// included.
func (l *Limiter) allowInto(ctx context.Context, key string, cost int64, d *Decision) (err error) {
	switch {
	case l.taker != nil:
		var allowed bool
		var remaining, reset, wait, window, lease, at int64
		allowed, remaining, reset, wait, window, lease, at, err = l.taker.TakeBrief(ctx, l.plan, key, cost)
		if err != nil {
			return l.takeFailed(ctx, key, cost, err, d)
		}
		d.Allowed, d.Cost, d.Remaining, d.Lease = allowed, cost, remaining, lease
		d.ResetAfter, d.EffectiveWindow = micros(reset), micros(window)
		d.Limit = l.limits[0]
		if allowed {
			d.Delay, d.at = micros(wait), at
		} else {
			d.RetryAfter = micros(wait)
		}
		return nil
	case l.direct:
		return l.take(ctx, key, cost, d)
	}
	*d, err = l.do(ctx, engine.Take, key, cost, nil)
	return err
}

// AllowNInto is AllowN writing the Decision to d, for a caller that makes
// decision after decision and keeps none past the next (a middleware, a
// worker's loop): on a plan of several limits, each limit's state goes
// into the memory of d.States when it has room for them all (its
// capacity), where AllowN allocates it. The next call with the same memory
// overwrites what this one wrote there: copy the States to keep them. The
// Decision's Receipt refers to them too: refund with it (RefundTo) before
// that next call, or decide with AllowN when units may come back later.
//
// With that room, a Limiter that goes straight to an in-process store (no
// clock, observer, deny cache or limits function: see WithClock and the
// others) decides on up to 4 limits without allocating; otherwise
// AllowNInto allocates as AllowN does.
func (l *Limiter) AllowNInto(ctx context.Context, key string, cost int64, d *Decision) error {
	states := d.States[:0]
	*d = Decision{}
	if l.direct && len(l.limits) > 1 { // else States stays nil, as the Decision of one limit has it
		d.States = states
	}
	return l.allowInto(ctx, key, cost, d)
}

// maxLentParts is the most limits whose parts (engine.Op.Parts) an
// operation takes from partsPool; beyond, the store allocates them.
const maxLentParts = 8

// partsPool holds the memory of each limit's part of a Result, lent to a
// store that takes it (Limiter.lends): the parts are needed only until the
// Decision is built, which copies them into its States.
var partsPool = sync.Pool{New: func() any { return new([maxLentParts]engine.LimitResult) }}

// lendParts returns memory for the parts of op's n limits from partsPool,
// set as op.Parts, or nil when l's store is not trusted with it or n is 1
// or too many. Give it back with returnParts once the Decision is built.
func (l *Limiter) lendParts(op *engine.Op, n int) *[maxLentParts]engine.LimitResult {
	if !l.lends || n < 2 || n > maxLentParts {
		return nil
	}
	p := partsPool.Get().(*[maxLentParts]engine.LimitResult)
	op.Parts = p[:n]
	return p
}

// returnParts gives lendParts' memory back, and takes it from op, which
// may go on to another store (the failure policy's).
func returnParts(op *engine.Op, p *[maxLentParts]engine.LimitResult) {
	if p != nil {
		partsPool.Put(p)
	}
	op.Parts = nil
}

// take is AllowN when l.direct and l has no taker (allowInto decides
// then): what op and apply do in that case, without the steps that do
// nothing there. It writes the Decision to d, which is zero: a Decision
// is large, and every call level that returns one copies it several
// times. d.States is nil, or the caller's memory for the States
// (AllowNInto), used when it has room for every limit.
func (l *Limiter) take(ctx context.Context, key string, cost int64, d *Decision) (err error) {
	op := engine.Op{Plan: l.plan, Key: key, Cost: cost}
	parts := l.lendParts(&op, len(l.limits))
	res, err := l.store.Apply(ctx, op)
	if err != nil {
		returnParts(&op, parts)
		*d, err = l.failed(ctx, op, l.limits, err, nil)
		return err
	}
	decide(d, l.limits, cost, &res)
	returnParts(&op, parts) // decide copied them
	d.charged(engine.Take, res.At)
	return nil
}

// takeFailed is allowInto when its store's TakeBrief failed with err:
// the failure policy decides, into d.
func (l *Limiter) takeFailed(ctx context.Context, key string, cost int64, err error, d *Decision) error {
	*d, err = l.failed(ctx, engine.Op{Plan: l.plan, Key: key, Cost: cost}, l.limits, err, nil)
	return err
}

// Peek reports the state of key's limits without changing it: Allowed is
// false only while usage exceeds a quota, after a Charge.
// It is shorthand for PeekN(ctx, key, 0).
func (l *Limiter) Peek(ctx context.Context, key string) (Decision, error) {
	return l.do(ctx, engine.Peek, key, 0, nil)
}

// PeekN reports what AllowN(ctx, key, cost) would decide, changing nothing.
func (l *Limiter) PeekN(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.do(ctx, engine.Peek, key, cost, nil)
}

// Charge adds cost to every limit of key unconditionally: the post-hoc part
// of a cost known only after the request ran. Usage may exceed the quota
// (up to DebtFactor times the capacity), so later requests wait. The
// Decision reports the state after the charge, as Peek would.
func (l *Limiter) Charge(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.do(ctx, engine.Charge, key, cost, nil)
}

// Refund gives cost back to every limit of key, never below zero usage, in
// the current state: the current window first, the newest log entries
// first. The Decision reports the state after the refund, as Peek would.
//
// Prefer RefundTo, with the Receipt of the Decision that charged the
// units: Refund does not know where they went, and a refund made after a
// window's end gives the new window room it never gave out (a fixed window
// admits more than its quota in it), and a token bucket that refilled
// since the charge gets units back that undoing the charge would not give.
// Refund is exact only for units taken in the current window, or from a
// bucket that stayed busy since.
func (l *Limiter) Refund(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.do(ctx, engine.Refund, key, cost, nil)
}

// Reset forgets key: every limit is fully replenished.
func (l *Limiter) Reset(ctx context.Context, key string) (Decision, error) {
	return l.do(ctx, engine.Reset, key, 0, nil)
}

// Release ends the acquisition lease of key on its Concurrency limits (the
// Decision.Lease of the AllowN that acquired it): its units are in flight
// no more. Releasing twice, or after the lease ran out, changes nothing;
// other limits are left alone. The Decision reports the state after the
// release, as Peek would. Units the Fallback store of the failure policy
// acquired (Decision.Source FromFallback) are released there, wherever
// the primary store is by then. A lease of 0 or less is an error wrapping
// ErrInvalidOp: check Decision.Lease > 0 first (a Decision of FailOpen,
// of cost 0 or without Concurrency limits has none).
func (l *Limiter) Release(ctx context.Context, key string, lease int64) (Decision, error) {
	return l.op(ctx, engine.Op{Key: key, Kind: engine.Release, Lease: lease}, nil)
}

func (l *Limiter) do(ctx context.Context, kind engine.Kind, key string, cost int64, o *Observation) (Decision, error) {
	return l.op(ctx, engine.Op{Key: key, Kind: kind, Cost: cost}, o)
}

// op runs an operation. o is nil, or the operation's Observation when the
// Limiter has observers (observe calls op with it), whose Latency, Err and
// Policy (when no Decision is made) op fills in.
func (l *Limiter) op(ctx context.Context, op engine.Op, o *Observation) (Decision, error) {
	if o == nil && l.obs != nil {
		return l.observe(ctx, op)
	}
	limits, plan := l.limits, l.plan
	if l.limitsFn != nil {
		var err error
		if limits, plan, err = l.planFor(ctx, op.Key); err != nil {
			return Decision{}, err
		}
	}
	op.Plan = plan
	if o != nil && len(limits) > 0 {
		o.Policy = limitName(&limits[0])
	}
	if l.deny != nil {
		return l.cached(ctx, op, limits, o)
	}
	return l.apply(ctx, op, limits, o)
}

// apply applies op, whose plan is that of limits, with the Limiter's clock,
// through the failure policy unless the store is InProcess.
func (l *Limiter) apply(ctx context.Context, op engine.Op, limits []Limit, o *Observation) (Decision, error) {
	if l.clock != nil {
		op.Now = l.clock.Now().UnixMicro()
	}
	if op.Kind == engine.Release && op.Lease&fallbackLease != 0 && l.policy.mode == failFallback {
		return l.releaseOnFallback(ctx, op, limits, o)
	}
	if !l.inProcess {
		return l.remote(ctx, op, limits, o)
	}
	var start time.Time
	if o != nil {
		start = time.Now()
	}
	parts := l.lendParts(&op, len(limits))
	res, err := l.store.Apply(ctx, op)
	if o != nil {
		o.Latency = time.Since(start)
	}
	if err != nil {
		returnParts(&op, parts)
		return l.failed(ctx, op, limits, err, o)
	}
	d := decision(limits, op.Cost, &res)
	returnParts(&op, parts)
	d.charged(op.Kind, res.At)
	return d, nil
}

// failed handles the error err of an InProcess store's Apply(ctx, op): a
// failure goes to the failure policy, and invalid input, a closed store or
// a caller that gave up back to the caller.
func (l *Limiter) failed(ctx context.Context, op engine.Op, limits []Limit, err error, o *Observation) (Decision, error) {
	if isFailure(ctx, err) {
		return l.fail(ctx, op, limits, err, o)
	}
	return Decision{}, err
}
