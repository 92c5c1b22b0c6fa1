package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/core/engine"
)

// DefaultTimeout bounds each store call of a Limiter whose store is not
// InProcess (WithTimeout). A healthy Redis answers in about a millisecond;
// the rest is headroom for a loaded machine (a client process that is
// descheduled, a collection), so that load alone never times a call out.
const DefaultTimeout = 100 * time.Millisecond

// InProcess is implemented by stores that keep their state in the process
// and never block on I/O, such as memstore. A Limiter calls them directly:
// no timeout (context.WithTimeout allocates, and they would never reach
// it) and no circuit breaker.
type InProcess interface {
	InProcess()
}

// A FailurePolicy says what a Limiter does when its store fails: returns an
// error, times out or is skipped by the open circuit breaker (see Breaker).
// Invalid input (errors wrapping ErrInvalidLimit, ErrInvalidCost,
// ErrInvalidKey or ErrInvalidOp), ErrClosed and the caller's own cancelled
// context are not failures: they are returned as they are. The zero value
// is FailClosed.
//
// Whatever the policy, the store's error is logged (rate-limited: see
// WithLogger), reaches the observers (WithObserver) and the hook
// (WithErrorHook), and never the client: adapters answer a FailClosed
// error with a generic 503.
//
// What each policy admits while the store is down, per limit and window:
//
//	FailClosed          nothing
//	FailOpen            everything: no bound at all
//	Fallback(s)         each instance up to the whole limit, on its own store:
//	                    a fleet of n instances up to n times the limit
//	Fallback(s, FleetSize(n))
//	                    each instance up to ⌊Q/n⌋ of the limit (at least
//	                    1): a fleet of n instances up to the limit (see
//	                    FleetSize for what a saturated instance admits)
//
// The fallback store starts from nothing: in the window in which the
// outage begins, what the shared store admitted before it comes on top (up
// to twice the limit in that window, for a fleet sized right), and the
// shared store, when it comes back, has not seen what the fallback admitted
// (up to twice the limit in the window in which it recovers).
type FailurePolicy struct {
	mode     uint8
	fallback Store
	fleet    int64 // Fallback: the share of each limit is 1/fleet
	err      error // an invalid policy, reported by WithFailurePolicy
}

const (
	failClosed uint8 = iota
	failOpen
	failFallback
)

var (
	// FailClosed denies: the operation returns an error wrapping
	// ErrUnavailable and the store's error. Adapters answer 503.
	FailClosed = FailurePolicy{mode: failClosed}
	// FailOpen admits: the operation returns a Decision with Allowed true
	// and Source FromFailOpen, and no error, so traffic flows unlimited
	// while the store is down.
	FailOpen = FailurePolicy{mode: failOpen}
)

// A FallbackOption configures Fallback.
type FallbackOption func(*FailurePolicy)

// FleetSize makes a Fallback store decide on 1/n of every limit: each
// limit's Quota and Burst divided by n, rounded down, at least 1; names,
// periods and algorithms unchanged. With n the number of instances sharing
// the store, the fleet as a whole admits at most the limit while the
// shared store is down (see FailurePolicy), except a limit below n, whose
// share of 1 per instance lets the fleet admit up to n. n must be at
// least 1.
// Default: 1, every instance decides on the whole limit.
//
// FleetSize promises a bound, not a rate: rounding down keeps the fleet
// under the limit, and an instance under saturation (requests arriving
// without pause) admits what its algorithm admits of the share q = ⌊Q/n⌋
// per period: q with FixedWindow, SlidingLog, TokenBucket and GCRA, but
// q−1 with SlidingWindow, the default, whose previous window still
// weighs until the current one ends (q = 1: one every other period; see
// SlidingWindow). PerSecond(10) over FleetSize(4) is 2 per second and
// instance, which a saturated SlidingWindow passes as 1: for small shares
// choose a FixedWindow or GCRA limit, or a smaller n.
func FleetSize(n int) FallbackOption {
	return func(p *FailurePolicy) {
		if n < 1 {
			p.err = fmt.Errorf("%w: FleetSize(%d): want at least 1", ErrInvalidOption, n)
			return
		}
		p.fleet = int64(n)
	}
}

// Fallback decides on store instead while the Limiter's store fails, with
// the same operation and limits, or 1/n of them with FleetSize(n):
// typically a memstore, so that each instance limits on its own. The
// Decision's Source is then FromFallback. If store fails too, the
// operation returns an error wrapping ErrUnavailable. A nil store is an
// error of WithFailurePolicy.
func Fallback(store Store, opts ...FallbackOption) FailurePolicy {
	p := FailurePolicy{mode: failFallback, fallback: store, fleet: 1}
	if store == nil {
		p.err = fmt.Errorf("%w: Fallback: nil store", ErrInvalidOption)
	}
	for _, o := range opts {
		if o == nil {
			p.err = fmt.Errorf("%w: Fallback: nil option", ErrInvalidOption)
			continue
		}
		o(&p)
	}
	return p
}

// WithTimeout bounds every store call by d (a context deadline, or the
// deadline of the store's ApplyBy: see Store), unless the store is
// InProcess. A call that times out is a failure: the failure
// policy answers it, and it counts towards opening the breaker (see
// Breaker). d must be positive. Default: DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(l *Limiter) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithTimeout(%v): want a positive duration", ErrInvalidOption, d)
		}
		l.timeout = d
		return nil
	})
}

// WithFailurePolicy sets what happens when the store fails: FailOpen,
// FailClosed or Fallback(store). Default: FailClosed.
func WithFailurePolicy(p FailurePolicy) Option {
	return optionFunc(func(l *Limiter) error {
		if p.err != nil {
			return p.err
		}
		l.policy = p
		return nil
	})
}

// WithErrorHook makes the Limiter call fn with every store failure, before
// the failure policy applies, from the goroutine of the operation; while
// the circuit breaker is open, fn receives an error wrapping
// ErrUnavailable for every skipped call. fn must be safe for concurrent
// use and quick (count, sample). Logging needs no hook: the Limiter logs
// failures itself, one line per burst of a cause (WithLogger), however
// many hooks are set; a hook that logs too logs every failure a second
// time. Default: none.
func WithErrorHook(fn func(ctx context.Context, key string, err error)) Option {
	return optionFunc(func(l *Limiter) error {
		if fn == nil {
			return fmt.Errorf("%w: WithErrorHook(nil)", ErrInvalidOption)
		}
		l.hook = fn
		return nil
	})
}

// isFailure reports whether err, returned by a store for a call under ctx
// (the caller's context), is a store failure rather than invalid input,
// a closed store or a caller that gave up.
func isFailure(ctx context.Context, err error) bool {
	switch {
	case errors.Is(err, ErrInvalidLimit), errors.Is(err, ErrInvalidCost), errors.Is(err, ErrInvalidKey),
		errors.Is(err, ErrInvalidOp), errors.Is(err, ErrClosed):
		return false
	}
	return ctx.Err() == nil
}

// remote applies op on a store that is not InProcess, for limits (those of
// op's plan): through the breaker, under the timeout, with the failure
// policy.
func (l *Limiter) remote(ctx context.Context, op engine.Op, limits []Limit, o *Observation) (Decision, error) {
	if la, ok := l.store.(localApplier); ok { // decided in memory: no timeout, no breaker
		if res, ok := la.ApplyLocal(op); ok {
			d := decision(limits, op.Cost, &res)
			d.charged(op.Kind, res.At) // the reservation's time: where its units were charged
			return d, nil
		}
	}
	var b *breaker
	if l.breakers != nil {
		b = l.breakers.of(&op)
	}
	var start int64
	if b != nil {
		start = b.now()
		if !b.allow(ctx, start) {
			l.logSkipped(ctx, &op, b.lastCause())
			return l.fail(ctx, op, limits, errOpen, o)
		}
	}
	var began time.Time
	if o != nil {
		began = time.Now()
	}
	var res engine.Result
	var err error
	if ab, ok := l.store.(deadlineApplier); ok {
		res, err = ab.ApplyBy(ctx, op, time.Now().Add(l.timeout))
	} else {
		cctx, cancel := context.WithTimeout(ctx, l.timeout)
		res, err = l.store.Apply(cctx, op)
		cancel()
	}
	if o != nil {
		o.Latency = time.Since(began)
	}
	switch {
	case err == nil:
		if b != nil {
			b.success(ctx, b.now())
		}
		d := decision(limits, op.Cost, &res)
		d.charged(op.Kind, res.At)
		return d, nil
	case !isFailure(ctx, err):
		return Decision{}, err
	}
	if b == nil {
		return l.fail(ctx, op, limits, err, o)
	}
	// The failure's line before the breaker's: the cause, then what it
	// opened. The breaker counts the call as it ended, not after the
	// policy answered.
	end := b.now()
	d, ferr := l.fail(ctx, op, limits, err, o)
	b.failure(ctx, start, end, err)
	return d, ferr
}

// fail reports err (to the log, the hook and o) and applies the failure
// policy.
func (l *Limiter) fail(ctx context.Context, op engine.Op, limits []Limit, err error, o *Observation) (Decision, error) {
	l.logFailure(ctx, &op, err)
	if l.hook != nil {
		l.hook(ctx, op.Key, err)
	}
	if o != nil {
		o.Err = err
	}
	switch l.policy.mode {
	case failOpen:
		d := Decision{Allowed: true, Cost: op.Cost, Source: FromFailOpen}
		if len(limits) > 0 {
			d.Limit = limits[0]
		}
		return d, nil
	case failFallback:
		return l.fallback(ctx, op, limits, err, o)
	}
	if err == errOpen {
		return Decision{}, err
	}
	return Decision{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// fallbackLease marks the Decision.Lease of units the Fallback store
// acquired, so that Limiter.Release ends them there, where they are held,
// however the primary store is doing by then. A store's leases are below
// 2^53 (they are µs times), so the bit is never one of theirs.
const fallbackLease = int64(1) << 62

// releaseOnFallback releases, on the Fallback store, the units of a lease
// it acquired (marked with fallbackLease).
func (l *Limiter) releaseOnFallback(ctx context.Context, op engine.Op, limits []Limit, o *Observation) (Decision, error) {
	op.Lease &^= fallbackLease
	d, err := l.fallback(ctx, op, limits, errReleaseOnFallback, o)
	if err == nil {
		d.Lease = 0
	}
	return d, err
}

// errReleaseOnFallback is the cause a failing release on the Fallback
// store reports beside the fallback's own error: the primary store was not
// asked, since the units are not held there.
var errReleaseOnFallback = errors.New("the units were acquired on the fallback store")

// A fleetShare is a plan's limits shared by a fleet (FleetSize), and their
// plan.
type fleetShare struct {
	limits []Limit
	plan   *engine.Plan
}

// fallback decides op on the Fallback store, under its share of the limits.
func (l *Limiter) fallback(ctx context.Context, op engine.Op, limits []Limit, err error, o *Observation) (Decision, error) {
	fb := l.policy.fallback
	if l.policy.fleet > 1 {
		if op.Plan == l.plan && l.fbPlan != nil {
			op.Plan, limits = l.fbPlan, l.fbLimits
		} else if sh, ok := l.fbShares.Load(op.Plan); ok {
			op.Plan, limits = sh.(*fleetShare).plan, sh.(*fleetShare).limits
		} else {
			// A plan of WithLimitsFunc: its share is compiled once, not
			// on every call of an outage, for as many plans as the
			// Limiter keeps (plans.go).
			sh := &fleetShare{limits: shareOf(limits, l.policy.fleet)}
			p, perr := compilePlan(op.Plan.Scope, sh.limits)
			if perr != nil {
				return Decision{}, perr
			}
			sh.plan = p
			if l.fbSharesN.Add(1) <= maxPlans {
				l.fbShares.Store(op.Plan, sh)
			}
			op.Plan, limits = p, sh.limits
		}
	}
	cctx, cancel := ctx, context.CancelFunc(nil)
	if _, ok := fb.(InProcess); !ok {
		cctx, cancel = context.WithTimeout(ctx, l.timeout)
	}
	res, ferr := fb.Apply(cctx, op)
	if cancel != nil {
		cancel()
	}
	if ferr == nil {
		d := decision(limits, op.Cost, &res)
		d.charged(op.Kind, res.At)
		d.Source = FromFallback
		if d.Lease > 0 {
			d.Lease |= fallbackLease
		}
		return d, nil
	}
	if !isFailure(ctx, ferr) {
		return Decision{}, ferr
	}
	l.logFailure(ctx, &op, ferr)
	if l.hook != nil {
		l.hook(ctx, op.Key, ferr)
	}
	ferr = fmt.Errorf("%w: %w; fallback: %w", ErrUnavailable, err, ferr)
	if o != nil {
		o.Err = ferr
	}
	return Decision{}, ferr
}

// shareOf returns limits with Quota and Burst divided by n (at least 1).
func shareOf(limits []Limit, n int64) []Limit {
	out := make([]Limit, len(limits))
	for i, lim := range limits {
		if lim.Name == "" {
			lim.Name = lim.PolicyName() // the name of the whole limit, for headers
		}
		lim.Quota = max(lim.Quota/n, 1)
		if lim.Burst > 0 {
			lim.Burst = max(lim.Burst/n, 1)
		}
		out[i] = lim
	}
	return out
}
