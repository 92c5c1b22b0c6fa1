package guard

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

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

	policy atomic.Pointer[policyCache] // the last RateLimit-Policy value
}

// New returns a Guard that limits requests with lim, keyed by
// keyfuncs.IP() unless WithKey says otherwise, and by the further
// rules of WithRule. It returns an error for a nil Limiter, and one
// wrapping ErrInvalidOption, naming the option, for an option given
// something it cannot use: a nil function (every option that takes a
// function rejects nil; leave the option out for its default), a nil
// Limiter in WithRule, a negative cost or max delay, an unknown header
// style.
func New(lim *core.Limiter, opts ...Option) (*Guard, error) {
	if lim == nil {
		return nil, errors.New("guard: New: nil *core.Limiter")
	}
	c := config{cost: 1, maxDelay: DefaultMaxDelay}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
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
	return &Guard{
		rules:     append([]rule{{lim: lim, key: c.key}}, c.rules...),
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

// taken is one rule's decision for the current request.
type taken struct {
	rule int
	key  string
	d    core.Decision
	// limits are the key's limits when d is a FailOpen decision
	// (core.FromFailOpen), which knows none: RateLimit-Policy lists them.
	limits []core.Limit
}

// Serve runs the flow for one request: r is the adapter's view of the
// request, w its response, next the rest of the chain. Serve calls next at
// most once, and only when the request passes (or in dry run); otherwise it
// writes a 429 or an error response through w. It returns the error of
// w.WriteResponse or of the DeniedHandler or ErrorHandler, for frameworks
// whose handlers return errors; the handler's own error is next's business.
//
// The rate-limit headers are set on w before next runs. Serve never
// panics on a hostile request. A panic in a function of the
// configuration (a key, cost or skip function, a Limiter's
// core.WithLimitsFunc, a DeniedHandler, an ErrorHandler, a hook) or in
// w propagates unchanged, with its own value and stack, but leaves no
// charge behind: what the rules took before it is refunded on its way
// through. A panic in next propagates after the request is settled as a
// 500 (see WithRefundOn).
func (g *Guard) Serve(r keyfuncs.Request, w Writer, next Next) error {
	ctx := r.Context()
	if g.skip != nil && g.skip(r) {
		next(ctx)
		return nil
	}
	cost := g.cost
	if g.costFn != nil {
		c, err := g.costFn(r)
		switch {
		case err != nil:
			return g.fail(w, r, next, &guardError{ErrCost, err})
		case c < 0:
			return g.fail(w, r, next, &guardError{ErrCost, errNegativeCost})
		}
		cost = c
	}

	var one [1]taken
	ts := one[:0]
	if len(g.rules) > 1 {
		ts = make([]taken, 0, len(g.rules))
	}
	// held reports that every rule of ts holds the request's cost, which
	// the flow has neither given back nor handed to the handler: a panic
	// or runtime.Goexit on the way gives it back, and goes on unchanged.
	held := false
	defer func() {
		if held {
			g.refund(r, ts, cost)
		}
	}()
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
			held = false
			g.refund(r, ts, cost)
			return g.fail(w, r, next, &guardError{ErrKey, err})
		}
		d, err := ru.lim.AllowN(ctx, key, cost)
		if err != nil {
			held = false
			g.refund(r, ts, cost)
			return g.fail(w, r, next, &guardError{ErrLimiter, err})
		}
		if !d.Allowed {
			held = false
			g.refund(r, ts, cost)
			ts = append(ts, taken{rule: i, key: key, d: d})
			return g.deny(w, r, next, ts, len(ts)-1, cost, false)
		}
		t := taken{rule: i, key: key, d: d}
		if d.Source == core.FromFailOpen {
			t.limits = ru.lim.Limits(ctx, key)
		}
		ts = append(ts, t)
		held = true
	}

	if delay, at := longestDelay(ts); delay > 0 {
		if delay > g.maxDelay {
			held = false
			g.refund(r, ts, cost)
			return g.deny(w, r, next, ts, at, cost, true)
		}
		if !g.dryRun {
			if err := sleep(ctx, delay); err != nil {
				held = false
				g.giveUp(r, ts, cost)
				return g.fail(w, r, next, &guardError{ErrWait, err})
			}
		}
	}
	g.setHeaders(w, ts, nil)
	held = false // the handler's now: pass settles it
	g.pass(r, next, ts, cost)
	return nil
}

// longestDelay returns the longest LeakyBucket delay among ts and where
// it is.
func longestDelay(ts []taken) (time.Duration, int) {
	var delay time.Duration
	at := 0
	for i := range ts {
		if d := ts[i].d.Delay; d > delay {
			delay, at = d, i
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

// giveUp refunds a request that stopped waiting its turn in a queue, on
// every rule of ts but those with a LeakyBucket limit: there the request
// keeps its slot, which stays empty. Giving it back would move the queue's
// tail back over the requests already scheduled behind it, and the next
// request would be scheduled with one of them, at the same instant.
func (g *Guard) giveUp(r keyfuncs.Request, ts []taken, cost int64) {
	for i := range ts {
		if !queues(&ts[i].d) {
			g.refund(r, ts[i:i+1], cost)
		}
	}
}

// queues reports whether d has a LeakyBucket limit.
func queues(d *core.Decision) bool {
	q := false
	d.Each(func(s core.LimitState) { q = q || s.Limit.Algorithm == core.LeakyBucket })
	return q
}

// deny answers a request that ts[at] denied: by its limits, or, when
// queued, by a LeakyBucket delay over the maximum.
func (g *Guard) deny(w Writer, r keyfuncs.Request, next Next, ts []taken, at int, cost int64, queued bool) error {
	t := &ts[at]
	dn := &Denial{
		Rule:     t.rule,
		Key:      t.key,
		Cost:     cost,
		Decision: t.d,
		Queued:   queued,
		DryRun:   g.dryRun,
	}
	retry := t.d.RetryAfter
	if queued {
		retry = t.d.Delay - g.maxDelay
	}
	if retry == core.Never {
		dn.Capacity = t.d.Limit.Capacity()
	} else {
		// Never earlier than the binding item's t (draft-11 §6: "the
		// Retry-After field value SHOULD NOT reference a point in time
		// earlier than the end of the effective window").
		secs := max(1, ceilSeconds(retry), ceilSeconds(itemOf(t, dn).window))
		dn.RetryAfter = time.Duration(secs) * time.Second
	}
	dn.Policies = violated(&t.d, queued, g.maxDelay)
	g.setHeaders(w, ts, dn)
	if g.hookDeny != nil {
		g.hookDeny(r, dn)
	}
	if g.dryRun {
		next(r.Context())
		return nil
	}
	return g.denied(w, r, dn)
}

// fail answers a request that cannot be decided.
func (g *Guard) fail(w Writer, r keyfuncs.Request, next Next, err error) error {
	if g.hookError != nil {
		g.hookError(r, err)
	}
	if g.dryRun {
		next(r.Context())
		return nil
	}
	return g.onErr(w, r, err)
}

// refund gives cost back to every rule of ts, which all admitted it.
func (g *Guard) refund(r keyfuncs.Request, ts []taken, cost int64) {
	if cost == 0 || len(ts) == 0 {
		return
	}
	g.adjust(r, ts, -cost)
}

// adjust charges (diff > 0) or refunds (diff < 0) every rule of ts. It
// runs after the handler or on the way out, so it ignores the request's
// cancellation. Failures go to the OnError hook once every rule is
// adjusted, so that a hook that panics leaves no rule behind.
func (g *Guard) adjust(r keyfuncs.Request, ts []taken, diff int64) {
	ctx := context.WithoutCancel(r.Context())
	var failed []error
	for i := range ts {
		t := &ts[i]
		lim := g.rules[t.rule].lim
		var d core.Decision
		var err error
		if diff > 0 {
			d, err = lim.Charge(ctx, t.key, diff)
		} else {
			d, err = lim.Refund(ctx, t.key, -diff)
		}
		if err != nil {
			if g.hookError != nil {
				failed = append(failed, &guardError{ErrLimiter, err})
			}
			continue
		}
		if d.Source != t.d.Source {
			continue // numbers of another store, or none (FailOpen)
		}
		// Headers written after this (a denial by a later rule) show the
		// state after the refund.
		t.d.Remaining, t.d.ResetAfter, t.d.EffectiveWindow, t.d.States = d.Remaining, d.ResetAfter, d.EffectiveWindow, d.States
		t.d.Limit = d.Limit
	}
	for _, err := range failed {
		g.hookError(r, err)
	}
}

// pass calls the handler and settles the request afterwards.
func (g *Guard) pass(r keyfuncs.Request, next Next, ts []taken, cost int64) {
	ctx := r.Context()
	if !g.reported && !g.NeedsResult() {
		next(ctx)
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
			g.settle(r, ts, cost, Result{Status: 500}, slot)
		}
	}()
	res := next(ctx)
	done = true
	g.settle(r, ts, cost, res, slot)
}

// settle charges or refunds the difference between the admitted cost and
// the real one.
func (g *Guard) settle(r keyfuncs.Request, ts []taken, cost int64, res Result, slot *costSlot) {
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
	if diff := max(actual, 0) - cost; diff != 0 {
		g.adjust(r, ts, diff)
	}
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
