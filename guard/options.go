package guard

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/keyfuncs"
)

// DefaultMaxDelay is the default bound on a LeakyBucket queueing delay.
const DefaultMaxDelay = 5 * time.Second

// An Option configures a Guard. Options are shared by every adapter: an
// adapter's own options are either these or translations of its
// framework's idioms into them.
//
// An option given an argument it cannot accept (a nil function, a negative
// cost) makes New return an error wrapping ErrInvalidOption that names it:
// bad configuration fails at construction, never on a request. A nil
// Option is ignored.
type Option func(*config)

// Invalid returns an Option that makes New fail with an error wrapping
// ErrInvalidOption, naming option and saying what is wrong with it, e.g.
// Invalid("WithSkipper", "nil function"). It is for adapters, whose
// options translate their framework's types into Options and must reject
// an argument at construction, as the options of this package do.
func Invalid(option, problem string) Option {
	return func(c *config) { c.invalid(option, problem) }
}

// errNilFunc is the problem of an option given a nil function.
const errNilFunc = "nil function"

// rule is one limiter applied to one key.
type rule struct {
	lim *core.Limiter
	key keyfuncs.Func
}

type config struct {
	key       keyfuncs.Func
	rules     []rule
	cost      int64
	costFn    func(keyfuncs.Request) (int64, error)
	skip      func(keyfuncs.Request) bool
	denied    DeniedHandler
	onErr     ErrorHandler
	style     HeaderStyle
	reset     ResetFormat
	clock     core.Clock
	dryRun    bool
	maxDelay  time.Duration
	refundOn  func(status int) bool
	reported  bool
	respCost  func(Result) int64
	hookDeny  func(keyfuncs.Request, *Denial)
	hookError func(keyfuncs.Request, error)
	adaptive  *adaptive.Limiter
	priority  func(keyfuncs.Request) adaptive.Priority
	err       error // the first invalid option
}

// invalid records that option is invalid, unless an earlier one was.
func (c *config) invalid(option, problem string) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s: %s", ErrInvalidOption, option, problem)
	}
}

// WithKey sets the key function of the Limiter passed to New: who is
// limited. A key function's error, an empty key or one longer than
// keyfuncs.MaxKeyLen fails the request through the ErrorHandler (by
// default 400, see ErrorStatus); it never lets the request through
// unlimited. fn must not be nil. Default: keyfuncs.IP(), the peer
// address.
func WithKey(fn keyfuncs.Func) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithKey", errNilFunc)
			return
		}
		c.key = fn
	}
}

// WithRule adds a further rule: lim applied to the key fn returns
// (keyfuncs.IP() for a rule per client address). Rules are applied in
// order, the Limiter passed to New first; a request passes only if every
// rule admits it. When a rule denies (or fails), the cost the earlier
// rules took is refunded, and the later rules are not consulted (their
// policies are listed all the same). Limiters keep separate state for a
// key unless they share a scope (core.WithName; by default limiters
// configured alike do); two rules on one state for one request charge it
// once (see Chain). Neither lim nor fn may be nil. Default: no further
// rules.
func WithRule(lim *core.Limiter, fn keyfuncs.Func) Option {
	return func(c *config) {
		switch {
		case lim == nil:
			c.invalid("WithRule", "nil *core.Limiter")
		case fn == nil:
			c.invalid("WithRule", "nil key function")
		default:
			c.rules = append(c.rules, rule{lim: lim, key: fn})
		}
	}
}

// WithCost sets the static cost of every request, in cost units: a costly
// endpoint may charge 5. It must not be negative. Default: 1.
func WithCost(n int64) Option {
	return func(c *config) {
		if n < 0 {
			c.invalid("WithCost", "negative cost")
			return
		}
		c.cost = n
	}
}

// WithCostFunc computes the cost of each request, replacing WithCost. An
// error fails the request through the ErrorHandler (by default 400: the
// cost is read from the request); a negative cost fails it with 500.
// fn must not be nil. Default: none.
func WithCostFunc(fn func(r keyfuncs.Request) (int64, error)) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithCostFunc", errNilFunc)
			return
		}
		c.costFn = fn
	}
}

// WithSkip makes the Guard pass requests for which fn reports true straight
// to the handler: no key, no decision, no headers. It is echo's Skipper and
// fiber's Next. fn must not be nil. Default: none, every request is
// limited.
func WithSkip(fn func(r keyfuncs.Request) bool) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithSkip", errNilFunc)
			return
		}
		c.skip = fn
	}
}

// WithDeniedHandler replaces the response to a denied request. The
// rate-limit headers and Retry-After are set before h runs; h writes the
// status and body. h must not be nil. Default: DefaultDeniedHandler, a
// 429 with an application/problem+json body.
func WithDeniedHandler(h DeniedHandler) Option {
	return func(c *config) {
		if h == nil {
			c.invalid("WithDeniedHandler", errNilFunc)
			return
		}
		c.denied = h
	}
}

// WithErrorHandler replaces the response to a request that cannot be
// decided: a key or cost function error, a store failure, a cancelled
// wait. h must not send the error's text to the client, and must not be
// nil. Default: DefaultErrorHandler, a status chosen by ErrorStatus with a
// generic application/problem+json body.
func WithErrorHandler(h ErrorHandler) Option {
	return func(c *config) {
		if h == nil {
			c.invalid("WithErrorHandler", errNilFunc)
			return
		}
		c.onErr = h
	}
}

// WithHeaders selects the rate-limit response headers. Each middleware
// writes the whole chain's state in its own style (see Chain), so stacked
// middlewares should share one style: with several, the last to write a
// field wins, and HeadersNone writes nothing. Default: HeadersDraft11.
func WithHeaders(style HeaderStyle) Option {
	return func(c *config) {
		if style >= numStyles {
			c.invalid("WithHeaders", "unknown header style")
			return
		}
		c.style = style
	}
}

// A ResetFormat is how HeadersLegacy sends X-RateLimit-Reset.
type ResetFormat uint8

const (
	// ResetDelta sends the number of seconds from now, as the drafts'
	// RateLimit-Reset and t do.
	ResetDelta ResetFormat = iota
	// ResetUnix sends a Unix time in seconds, as GitHub's API, ulule's
	// limiter and express-rate-limit do: now (WithClock) plus the delta,
	// rounded up.
	ResetUnix

	numResetFormats
)

// WithLegacyReset selects the X-RateLimit-Reset of HeadersLegacy: a delta
// in seconds or a Unix time. Other header styles ignore it. Default:
// ResetDelta.
func WithLegacyReset(f ResetFormat) Option {
	return func(c *config) {
		if f >= numResetFormats {
			c.invalid("WithLegacyReset", "unknown reset format")
			return
		}
		c.reset = f
	}
}

// WithClock sets the clock of the times the Guard sends as dates: the Unix
// time of WithLegacyReset(ResetUnix). Decisions use their Limiter's clock,
// never this one. clock must not be nil. Default: the wall clock.
func WithClock(clock core.Clock) Option {
	return func(c *config) {
		if clock == nil {
			c.invalid("WithClock", "nil clock")
			return
		}
		c.clock = clock
	}
}

// WithDryRun makes the Guard decide, count and set headers as usual, and
// report denials (OnDenied) and errors (OnError), but never block: denied
// requests, failing requests and queued LeakyBucket requests all go
// straight to the handler, without Retry-After. The store's state changes
// exactly as it would without dry run. Default: false.
func WithDryRun(on bool) Option {
	return func(c *config) { c.dryRun = on }
}

// WithMaxDelay bounds how long a request admitted by a LeakyBucket limit
// waits in its queue (Decision.Delay). A request whose delay exceeds d is
// refunded and denied, with Retry-After the excess rounded up; one within
// it waits, cancelled with the request's context. 0 denies every queued
// request (a LeakyBucket then behaves as GCRA); d must not be negative.
//
// A request whose wait is cancelled fails with ErrWait. It, and a request
// over d, is refunded on every rule: a LeakyBucket gives its turn back
// only while no later request's turn is behind it (see core.Receipt), and
// the turn otherwise passes empty, so that no turn is given out twice and
// the queue's output never exceeds Quota per Period. Default:
// DefaultMaxDelay.
func WithMaxDelay(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.invalid("WithMaxDelay", "negative delay")
			return
		}
		c.maxDelay = d
	}
}

// WithRefundOn refunds the whole cost of a request, on every rule, when
// the handler's status makes match report true; e.g. ServerErrors, so a
// failing backend does not eat the client's quota. It takes precedence over
// WithReportedCost and WithResponseCost. Of stacked middlewares that
// settle one limiter state, the innermost settles it. match must not be
// nil. Default: none.
func WithRefundOn(match func(status int) bool) Option {
	return func(c *config) {
		if match == nil {
			c.invalid("WithRefundOn", errNilFunc)
			return
		}
		c.refundOn = match
	}
}

// ServerErrors reports whether status is a 5xx: a matcher for WithRefundOn.
func ServerErrors(status int) bool { return status >= 500 && status <= 599 }

// NotPassed reports whether status is a 5xx or a 429: a matcher for
// WithRefundOn that gives a request's cost back when the application
// answers it with 429 or a server error. A Tollgate middleware further in
// that denies a request needs no such option: stacked middlewares act as
// one decision, and the denial leaves no charge in any of them (see
// Chain).
func NotPassed(status int) bool { return status == 429 || ServerErrors(status) }

// WithReportedCost lets the handler report the real cost of a request,
// known only once it ran (tokens generated, rows scanned), with ReportCost
// or AddCost on its request context. After the handler, the difference
// from the admitted cost is charged (core.Limiter.Charge) or refunded on
// every rule. A request that reports nothing keeps its admitted cost. It
// costs two allocations per request for the context. Default: off.
func WithReportedCost() Option {
	return func(c *config) { c.reported = true }
}

// WithResponseCost computes the real cost of a request from its response,
// e.g. func(r Result) int64 { return 1 + r.Bytes/1024 }, and settles the
// difference from the admitted cost as WithReportedCost does. A cost the
// handler reports takes precedence. fn must not be nil. Default: none.
func WithResponseCost(fn func(Result) int64) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithResponseCost", errNilFunc)
			return
		}
		c.respCost = fn
	}
}

// WithOnDenied calls fn for every denied request, dry run included
// (Denial.DryRun), before the DeniedHandler; for metrics and logs. d is
// valid only during the call. fn must not be nil. Default: none.
func WithOnDenied(fn func(r keyfuncs.Request, d *Denial)) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithOnDenied", errNilFunc)
			return
		}
		c.hookDeny = fn
	}
}

// WithOnError calls fn with every error: those the ErrorHandler then
// answers, those of dry run (which pass), and failed refunds and charges
// after the handler (which nobody else sees). For logs. fn must not be
// nil. Default: none.
func WithOnError(fn func(r keyfuncs.Request, err error)) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithOnError", errNilFunc)
			return
		}
		c.hookError = fn
	}
}
