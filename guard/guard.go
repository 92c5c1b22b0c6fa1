package guard

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/keyfuncs"
)

// A Guard is the request flow of every adapter, written once:
//
//	skip? → key → cost → decide (every rule) → wait (LeakyBucket) →
//	headers → deny, or call the handler → settle
//
// Create it with New and call Serve for every request. A Guard is
// immutable and safe for concurrent use.
type Guard struct {
	rules     []rule
	cost      int64
	costFn    func(keyfuncs.Request) (int64, error)
	skip      func(keyfuncs.Request) bool
	denied    DeniedHandler
	onErr     ErrorHandler
	style     HeaderStyle
	resetUnix bool
	clock     core.Clock
	dryRun    bool
	maxDelay  time.Duration
	refundOn  func(int) bool
	reported  bool
	respCost  func(Result) int64
	hookDeny  func(keyfuncs.Request, *Denial)
	hookError func(keyfuncs.Request, error)
	adaptive  *adaptive.Limiter                        // nil: none (WithAdaptive)
	priority  func(keyfuncs.Request) adaptive.Priority // nil: every request critical

	policy     [policySlots]atomic.Pointer[policyCache] // the last listings' policies (headers.go)
	nextPolicy atomic.Uint32                            // the slot the next new listing takes
	routes     routeMemory                              // the policies of the middlewares inside, per route
}

// New returns a Guard that limits requests with lim, keyed by
// keyfuncs.IP() unless WithKey says otherwise, and by the further
// rules of WithRule. It returns an error wrapping ErrNilLimiter for a nil
// Limiter, unless WithAdaptive gives an adaptive limit (which then limits
// alone, with the rules of WithRule if any), and one
// wrapping ErrInvalidOption, naming the option, for an option given
// something it cannot use: a nil function (every option that takes a
// function rejects nil; leave the option out for its default), a nil
// Limiter in WithRule, a negative cost or max delay, an unknown header
// style.
func New(lim *core.Limiter, opts ...Option) (*Guard, error) {
	c := config{cost: 1, maxDelay: DefaultMaxDelay}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if lim == nil && c.adaptive == nil {
		return nil, ErrNilLimiter
	}
	if c.err != nil {
		return nil, c.err
	}
	if c.key == nil {
		c.key = keyfuncs.IP()
	}
	if c.denied == nil {
		c.denied = DefaultDeniedHandler
	}
	if c.onErr == nil {
		c.onErr = DefaultErrorHandler
	}
	var rules []rule
	if lim != nil {
		rules = []rule{{lim: lim, key: c.key}}
	}
	return &Guard{
		rules:     append(rules, c.rules...),
		cost:      c.cost,
		costFn:    c.costFn,
		skip:      c.skip,
		denied:    c.denied,
		onErr:     c.onErr,
		style:     c.style,
		resetUnix: c.reset == ResetUnix,
		clock:     c.clock,
		dryRun:    c.dryRun,
		maxDelay:  c.maxDelay,
		refundOn:  c.refundOn,
		reported:  c.reported,
		respCost:  c.respCost,
		hookDeny:  c.hookDeny,
		hookError: c.hookError,
		adaptive:  c.adaptive,
		priority:  c.priority,
	}, nil
}

// now returns the time of the Guard's clock (WithClock).
func (g *Guard) now() time.Time {
	if g.clock != nil {
		return g.clock.Now()
	}
	return time.Now()
}

// NeedsResult reports whether the Guard reads the Result that Next
// returns (WithRefundOn, WithResponseCost). When it does not, an adapter
// need not wrap its response writer to observe the status and size.
func (g *Guard) NeedsResult() bool { return g.refundOn != nil || g.respCost != nil }

// ReportsCost reports whether the Guard was built with WithReportedCost:
// only then may the context Next receives differ from the request's (it
// carries the cost slot), and an adapter passes it on only then. One that
// sets the context in place, as fiber's user context, puts the previous
// one back once Next returns.
func (g *Guard) ReportsCost() bool { return g.reported }

// Serve runs the flow for one request: r is the adapter's view of the
// request, w its response, next the rest of the chain. Serve calls next at
// most once, and only when the request passes (or in dry run); otherwise it
// writes a 429 or an error response through w. It returns the error of
// w.WriteResponse or of the DeniedHandler or ErrorHandler, for frameworks
// whose handlers return errors; the handler's own error is next's business.
//
// When w is a ChainWriter, Serve works on its request's Chain, shared
// with the other Tollgate middlewares the request crosses, so that they
// act as one decision (see Chain); otherwise on a Chain of its own.
//
// The rate-limit headers are set on w before next runs. Serve never
// panics on a hostile request. A panic in a function of the
// configuration (a key, cost or skip function, a Limiter's
// core.WithLimitsFunc, a DeniedHandler, an ErrorHandler, a hook) or in
// w propagates unchanged, with its own value and stack, but leaves no
// charge behind: what the request holds on its chain is refunded on its
// way through. A panic in next propagates after the request is settled as
// a 500 (see WithRefundOn).
func (g *Guard) Serve(r keyfuncs.Request, w Writer, next Next) error {
	ctx := r.Context()
	carried := chainOf(w)
	ch, own := carried.acquire()
	// open reports that the flow has not reached its outcome (deny, fail
	// or pass): a panic or runtime.Goexit in a function of the
	// configuration on the way stops the chain, giving back everything the
	// request holds on it, and goes on unchanged. The outermost middleware
	// gives the chain's state back when the request is over.
	open := true
	// ticket is a unit of the adaptive limit (adaptive.go), held from
	// admit until pass releases it, or until this returns.
	var ticket adaptive.Ticket
	// One defer, so that it is open-coded (the compiler's limit is 15
	// returns × defers): a deferred call of its own made every request
	// pay the runtime's defer records.
	defer func() {
		if open || ticket.Held() { // the flow stopped on the way, or panicked
			// Each step deferred in turn, so that the next still runs when
			// one panics (an adaptive limit's observer, or a hook or a
			// store on a refund): the ticket's release, then stop, then
			// the state given back. A Chain that keeps its state (Keep)
			// would otherwise keep it busy, and its next requests would
			// find it in use.
			if own {
				defer carried.release()
				own = false
			}
			if open {
				defer ch.stop(r)
			}
			g.release(ctx, &ticket, false)
		}
		if own {
			carried.release()
		}
	}()
	if g.skip != nil && g.skip(r) {
		open = false
		next(ctx)
		return nil
	}
	outer := len(ch.entries) // the entries of the middlewares around this one
	cost := g.cost
	if g.costFn != nil {
		c, err := g.costFn(r)
		if err == nil && c < 0 {
			err = errNegativeCost
		}
		if err != nil {
			open = false
			return g.fail(w, r, next, ch, nil, outer, &guardError{ErrCost, err})
		}
		cost = c
	}
	if g.adaptive != nil && !slices.Contains(ch.admitted, g.adaptive) {
		var ok bool
		if ticket, ok = g.admit(r); !ok {
			open = false
			return g.shed(w, r, next, ch, cost)
		}
		ch.admitted = append(ch.admitted, g.adaptive)
	}

	var ubuf [2]int
	uses := ubuf[:0] // the entries of this middleware's rules
	var cbuf [2]charge
	charges := cbuf[:0] // what this call charged
	for i := range g.rules {
		ru := &g.rules[i]
		key, err := ru.key(r)
		if err == nil && key == "" {
			err = errEmptyKey
		} else if err == nil && len(key) > keyfuncs.MaxKeyLen {
			err = errLongKey
		}
		if err != nil {
			if errors.Is(err, ErrSkipRule) {
				continue
			}
			open = false
			return g.fail(w, r, next, ch, charges, outer, &guardError{ErrKey, err})
		}
		at := ch.find(ru.lim, key)
		ask := cost // what this rule asks of the state
		if at >= 0 {
			// Charged already for this request, by another rule or an
			// outer middleware: charge only what this cost adds.
			if !slices.Contains(uses, at) {
				uses = append(uses, at)
			}
			if ask = cost - ch.entries[at].held; ask <= 0 {
				continue
			}
		}
		// A new entry is decided in place, in its own Decision: a Decision
		// decided apart and then copied in is read back, 16 bytes at a
		// time, right after the Limiter's 8-byte stores, and the copy
		// waits for them to reach the cache. An entry charged already
		// keeps its Decision until the new one is made.
		var d *core.Decision
		added := at < 0
		if added {
			at = ch.add(g, ru.lim, key)
			d = &ch.entries[at].d
			if ch.lent { // the chain's memory is another entry's: none lent
				d.States = nil
			} else { // its States go in the chain's memory
				d.States = ch.states[:0]
			}
		} else {
			d = new(core.Decision) // on the stack: zeroed only on this path
		}
		err = ru.lim.AllowNInto(core.ContextWithDryRun(ctx, g.dryRun), key, ask, d)
		if ch.lends(d) {
			ch.lent = true
		}
		if err != nil {
			if added {
				ch.entries = ch.entries[:at] // it holds nothing
			}
			open = false
			return g.fail(w, r, next, ch, charges, outer, &guardError{ErrLimiter, err})
		}
		if added {
			if d.Source == core.FromFailOpen {
				ch.entries[at].limits = ru.lim.Limits(ctx, key)
			}
			uses = append(uses, at)
		} else {
			ch.entries[at].d = *d
		}
		if !d.Allowed {
			open = false
			return g.deny(w, r, next, ch, charges, i, at, cost, false)
		}
		ch.entries[at].hold(d, ask)
		charges = append(charges, charge{at, ask, d.Lease})
		if d.Lease != 0 {
			ch.entries[at].leases = append(ch.entries[at].leases, d.Lease)
		}
	}

	if delay, at := longestDelay(ch, charges); delay > 0 {
		if delay > g.maxDelay {
			open = false
			return g.deny(w, r, next, ch, charges, ruleOf(g, ch, at), at, cost, true)
		}
		if !g.dryRun {
			if err := sleep(ctx, delay); err != nil {
				open = false
				return g.fail(w, r, next, ch, charges, outer, &guardError{ErrWait, err})
			}
		}
	}
	g.setHeaders(w, &listing{entries: ch.entries, buf: ch.buf[:0]})
	open = false // the handler's now: pass settles it
	g.pass(ctx, r, next, ch, uses, charges, &ticket)
	return nil
}

// ruleOf returns the index of the rule of g whose state ch.entries[at] is.
func ruleOf(g *Guard, ch *chainState, at int) int {
	e := &ch.entries[at]
	for i := range g.rules {
		if g.rules[i].lim == e.lim || sameState(g.rules[i].lim, e.lim) {
			return i
		}
	}
	return 0
}

// longestDelay returns the longest LeakyBucket delay of the decisions
// charged, and the entry it is in.
func longestDelay(ch *chainState, charges []charge) (time.Duration, int) {
	var delay time.Duration
	at := 0
	for _, c := range charges {
		if d := ch.entries[c.at].d.Delay; d > delay {
			delay, at = d, c.at
		}
	}
	return delay, at
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// deny answers a request that the state of ch.entries[at], of rule, denied:
// by its limits, or, when queued, by a LeakyBucket delay over the maximum.
// It gives back what the request holds on the whole chain (in dry run, what
// this call charged), and answers with the headers of the whole chain,
// listing after its entries the policies of this middleware's later rules,
// which were not consulted, and those the middlewares inside it listed on
// the route (see WithHeaders).
func (g *Guard) deny(w Writer, r keyfuncs.Request, next Next, ch *chainState, charges []charge, rule, at int, cost int64, queued bool) error {
	e := &ch.entries[at]
	dn := &Denial{
		Rule:     rule,
		Key:      e.key,
		Cost:     cost,
		Decision: e.d,
		Queued:   queued,
		DryRun:   g.dryRun,
	}
	if ch.lends(&e.d) { // the handlers may keep the Denial past the request
		dn.Decision.States = slices.Clone(e.d.States)
	}
	retry := e.d.RetryAfter
	e.pin = indexOf(&e.d) + 1
	if queued {
		retry = e.d.Delay - g.maxDelay
		e.pin = queuedIndex(&e.d) + 1
	}
	if retry == core.Never {
		dn.Capacity = e.d.Limit.Capacity()
		e.never = true
	}
	violated := violatedLimits(&e.d, queued, g.maxDelay) // before the refund changes e.d
	if g.dryRun {
		ch.undo(r, charges)
	} else {
		ch.stop(r)
	}
	if retry != core.Never {
		// Never earlier than the binding item's t (draft-11 §6: "the
		// Retry-After field value SHOULD NOT reference a point in time
		// earlier than the end of the effective window"), after the refund.
		_, it := e.item()
		secs := max(1, ceilSeconds(retry), ceilSeconds(it.window))
		dn.RetryAfter = time.Duration(secs) * time.Second
	}
	ls := listing{entries: ch.entries, buf: ch.buf[:0], denied: at, dn: dn, violated: violated}
	if !queued { // a queued request was decided by every rule
		ls.extra = g.unasked(r, ch, rule)
	}
	ls.extra = append(ls.extra, g.routes.inner(routeOf(r))...)
	dn.Policies = g.setHeaders(w, &ls)
	return g.answer(w, r, next, dn)
}

// answer reports the denial dn to the OnDenied hook and answers it with
// the DeniedHandler; in dry run, the request goes on instead.
func (g *Guard) answer(w Writer, r keyfuncs.Request, next Next, dn *Denial) error {
	if g.hookDeny != nil {
		g.hookDeny(r, dn)
	}
	if g.dryRun {
		next(r.Context())
		return nil
	}
	return g.denied(w, r, dn)
}

// queuedIndex returns the index, among d's limits, of the LeakyBucket
// limit with the longest delay.
func queuedIndex(d *core.Decision) int {
	at, j := 0, 0
	var longest time.Duration = -1
	d.Each(func(s core.LimitState) {
		if s.Limit.Algorithm == core.LeakyBucket && s.Delay > longest {
			at, longest = j, s.Delay
		}
		j++
	})
	return at
}

// unasked returns the limits of the rules after rule, which a denial kept
// from being consulted, so that a 429 lists the same policies as a
// response that passed: for each, the limits for its key (a rule whose key
// function fails or exempts the request is not listed, as it is not when
// the request passes; a state on the chain already is listed there).
func (g *Guard) unasked(r keyfuncs.Request, ch *chainState, rule int) []core.Limit {
	var out []core.Limit
	for i := rule + 1; i < len(g.rules); i++ {
		ru := &g.rules[i]
		key, err := ru.key(r)
		if err != nil || key == "" || len(key) > keyfuncs.MaxKeyLen || ch.find(ru.lim, key) >= 0 {
			continue
		}
		out = append(out, ru.lim.Limits(r.Context(), key)...)
	}
	return out
}

// fail answers a request that cannot be decided. It gives back what the
// request holds on the whole chain (in dry run, what this call charged,
// and the request goes on), and brings the headers that the middlewares
// around this one set, for ch.entries[:outer], up to date.
func (g *Guard) fail(w Writer, r keyfuncs.Request, next Next, ch *chainState, charges []charge, outer int, err error) error {
	if g.dryRun {
		ch.undo(r, charges)
		if g.hookError != nil {
			g.hookError(r, err)
		}
		next(r.Context())
		return nil
	}
	ch.stop(r)
	if outer > 0 {
		g.setHeaders(w, &listing{entries: ch.entries[:outer], buf: ch.buf[:0]})
	}
	if g.hookError != nil {
		g.hookError(r, err)
	}
	return g.onErr(w, r, err)
}

// pass calls the handler, settles the request afterwards, releases the
// units in flight this middleware acquired (charges) once the handler
// returns or panics, and learns the policies the middlewares inside this
// one listed on the route. reqCtx is the request's context, as Serve read
// it before the handler: what follows the handler uses it, not
// r.Context() again, where an adapter that sets the context in place
// (fiber) may find the handlers' own.
func (g *Guard) pass(reqCtx context.Context, r keyfuncs.Request, next Next, ch *chainState, uses []int, charges []charge, ticket *adaptive.Ticket) {
	if holds(charges) {
		defer ch.releaseAll(reqCtx, r, charges)
	}
	ctx := reqCtx
	mark := len(ch.entries) // the entries of the middlewares inside start here
	if !g.reported && !g.NeedsResult() {
		next(ctx)
		g.release(reqCtx, ticket, !ch.stopped)
		if g.mayLearn(ch, mark) {
			g.learn(r, ch, mark)
		}
		return
	}
	var slot *costSlot
	if g.reported {
		slot = new(costSlot)
		ctx = context.WithValue(ctx, slotKey{}, slot)
	}
	done := false
	defer func() {
		if !done { // next panicked: settle as a server error
			g.settle(reqCtx, r, ch, uses, Result{Status: 500}, slot)
		}
	}()
	res := next(ctx)
	done = true
	g.release(reqCtx, ticket, !ch.stopped)
	g.settle(reqCtx, r, ch, uses, res, slot)
	if g.mayLearn(ch, mark) {
		g.learn(r, ch, mark)
	}
}

// settle charges or refunds the difference between what each entry of
// uses holds and the request's real cost, unless a middleware inside this
// one settled it already, or stopped the request (and gave everything
// back). It runs under the request's context reqCtx without its
// cancellation.
func (g *Guard) settle(reqCtx context.Context, r keyfuncs.Request, ch *chainState, uses []int, res Result, slot *costSlot) {
	if ch.stopped {
		return
	}
	var actual int64
	switch {
	case g.refundOn != nil && g.refundOn(res.Status):
		actual = 0
	case slot != nil && slot.set.Load():
		actual = slot.n.Load()
	case g.respCost != nil:
		actual = g.respCost(res)
	default:
		return
	}
	actual = max(actual, 0)
	ctx := context.WithoutCancel(reqCtx)
	var fs failures
	for _, at := range uses {
		e := &ch.entries[at]
		if e.settled {
			continue
		}
		e.settled = true
		if diff := actual - e.held; diff != 0 {
			if err := e.adjust(ctx, diff); err != nil {
				fs = append(fs, failure{g, err})
			}
		}
	}
	fs.report(r)
}

// ErrSkipRule, returned by a rule's key function, exempts the request from
// that rule: a per-user rule, say, for an anonymous request. Optional turns
// a key function's "no key" into ErrSkipRule.
var ErrSkipRule = errors.New("guard: skip rule")

// Optional returns a key function that returns ErrSkipRule where fn
// returns an empty key or an error matching keyfuncs.ErrNoKey, so that
// requests without that key (anonymous ones, for a per-user rule) are
// exempt from the rule instead of failing with 400. Other errors pass
// through. Optional(nil) is nil, which WithKey and WithRule reject.
func Optional(fn keyfuncs.Func) keyfuncs.Func {
	if fn == nil {
		return nil
	}
	return func(r keyfuncs.Request) (string, error) {
		k, err := fn(r)
		if (err == nil && k == "") || errors.Is(err, keyfuncs.ErrNoKey) {
			return "", ErrSkipRule
		}
		return k, err
	}
}

var (
	errEmptyKey     = &wrapped{"empty key", keyfuncs.ErrNoKey}
	errLongKey      = &wrapped{"key longer than keyfuncs.MaxKeyLen", keyfuncs.ErrKeyTooLong}
	errNegativeCost = &wrapped{"negative cost", core.ErrInvalidCost}
)

// wrapped is a fixed error wrapping another.
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg + ": " + e.err.Error() }
func (e *wrapped) Unwrap() error { return e.err }

// guardError pairs a sentinel of this package with the error behind it.
type guardError struct {
	kind error
	err  error
}

func (e *guardError) Error() string   { return e.kind.Error() + ": " + e.err.Error() }
func (e *guardError) Unwrap() []error { return []error{e.kind, e.err} }
