package guard

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/keyfuncs"
)

// The adaptive concurrency limit's step of the flow (package adaptive):
//
//	skip? → cost → admit (WithAdaptive) → key → decide → ... → next → release
//
// A request is admitted to the adaptive limit before any rule decides,
// so one it sheds is charged nothing by this middleware's rules, and what
// the middlewares around it took is refunded through the chain, as for a
// denial. An admitted request that a rule then denies, or that fails,
// gives its unit back without a latency sample; one that reaches the
// handler gives it back when the handler returns, with its latency
// (admission → return) as a sample, unless its context ended first (the
// client disconnected or gave up: no sample), the handler panicked, or a
// middleware further in denied or shed the request (its latency is not
// the service's).

// WithAdaptive applies the adaptive concurrency limit lim to every
// request, before the rules: a request it sheds is answered 503 Service
// Unavailable (gRPC: Unavailable), with a Retry-After from
// adaptive.Limiter.RetryAfter and a problem+json body of type
// ProblemTypeOverloaded (see Denial.Overloaded), through the
// DeniedHandler. With it, New accepts a nil Limiter: the adaptive limit
// alone. lim must not be nil. Several Guards may share one Limiter (one
// limit for a whole service): a request crossing several of them on its
// Chain (stacked middlewares) holds one unit, taken by the outermost, and
// its latency is measured there. Default: none.
func WithAdaptive(lim *adaptive.Limiter) Option {
	return func(c *config) {
		if lim == nil {
			c.invalid("WithAdaptive", "nil *adaptive.Limiter")
			return
		}
		c.adaptive = lim
	}
}

// WithPriority chooses each request's priority for the adaptive limit
// (WithAdaptive): adaptive.Sheddable requests are shed first. fn must not
// be nil. Default: every request adaptive.Critical.
func WithPriority(fn func(r keyfuncs.Request) adaptive.Priority) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithPriority", errNilFunc)
			return
		}
		c.priority = fn
	}
}

// admit asks the adaptive limit to admit r.
func (g *Guard) admit(r keyfuncs.Request) (adaptive.Ticket, bool) {
	p := adaptive.Critical
	if g.priority != nil {
		p = g.priority(r)
	}
	return g.adaptive.Acquire(p)
}

// shed answers a request the adaptive limit refused: it gives back what
// the request holds on the chain (the middlewares around this one), and
// answers through the DeniedHandler with a Denial that is Overloaded,
// with the headers of the chain and the policies of this middleware's
// rules, which were not consulted.
func (g *Guard) shed(w Writer, r keyfuncs.Request, next Next, ch *chainState, cost int64) error {
	dn := &Denial{Rule: -1, Cost: cost, Overloaded: true, DryRun: g.dryRun}
	if !g.dryRun {
		ch.stop(r)
	}
	dn.RetryAfter = time.Duration(max(1, ceilSeconds(g.adaptive.RetryAfter()))) * time.Second
	ls := listing{entries: ch.entries, buf: ch.buf[:0], denied: len(ch.entries), dn: dn}
	ls.extra = g.unasked(r, ch, -1)
	ls.extra = append(ls.extra, g.routes.inner(routeOf(r))...)
	g.setHeaders(w, &ls)
	return g.answer(w, r, next, dn)
}

// release gives back t, a ticket of the adaptive limit: with its latency
// as a sample when served, unless the request's context, ctx, ended first.
// ctx is the context the request came with, read before the handlers ran:
// a context they set in its place (fiber's user context, gin's request),
// which a timeout middleware inside cancels as it returns, is not the
// request's.
func (g *Guard) release(ctx context.Context, t *adaptive.Ticket, served bool) {
	if !t.Held() {
		return
	}
	o := adaptive.Dropped
	if served && ctx.Err() == nil {
		o = adaptive.Served
	}
	g.adaptive.Release(*t, o)
	*t = adaptive.Ticket{}
}
