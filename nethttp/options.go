package nethttp

import (
	"net/http"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// An Option configures the middleware. It is a guard.Option: every option
// of package guard works here too; those below are the same options, or
// their translations to net/http types. An option given a nil function
// makes New panic, naming the option: leave it out for its default.
type Option = guard.Option

// WithKeyFunc sets the key function, over *http.Request: who is limited.
// A key from an earlier middleware is a context value away:
//
//	nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
//		return userFrom(r.Context()), nil
//	})
//
// A key function's error, or an empty key, fails the request with 400
// (see guard.ErrorStatus); it never passes unlimited. For the
// framework-neutral functions of keyfuncs, use WithKey. Default:
// keyfuncs.IP(), the peer address.
func WithKeyFunc(fn func(r *http.Request) (string, error)) Option {
	if fn == nil {
		return guard.Invalid("WithKeyFunc", "nil function")
	}
	return guard.WithKey(KeyFunc(fn))
}

// WithKey sets the key function to one of package keyfuncs:
//
//	nethttp.WithKey(keyfuncs.Header("X-API-Key"))
//	nethttp.WithKey(keyfuncs.IP(keyfuncs.TrustProxies(lb))) // behind a load balancer
//
// It is guard.WithKey. The standard mux sets the route pattern
// (keyfuncs.Route) only for a handler wrapped inside it, not for
// middleware around the mux itself. Default: keyfuncs.IP().
func WithKey(fn keyfuncs.Func) Option { return guard.WithKey(fn) }

// WithRule adds a further limiter applied to its own key, after lim: see
// guard.WithRule. Use KeyFunc for a key function over *http.Request, and
// guard.Optional to exempt requests without the key, and keyfuncs.IP()
// for a rule per client address. Default: none.
func WithRule(lim *core.Limiter, fn keyfuncs.Func) Option { return guard.WithRule(lim, fn) }

// WithCost sets the static cost of every request. Default: 1.
func WithCost(n int64) Option { return guard.WithCost(n) }

// WithCostFunc computes the cost of each request; see guard.WithCostFunc.
// Default: none.
func WithCostFunc(fn func(r *http.Request) (int64, error)) Option {
	if fn == nil {
		return guard.Invalid("WithCostFunc", "nil function")
	}
	return guard.WithCostFunc(func(r keyfuncs.Request) (int64, error) { return fn(Request(r)) })
}

// WithSkip passes requests for which fn reports true straight to the
// handler, unlimited and without headers. Default: none.
func WithSkip(fn func(r *http.Request) bool) Option {
	if fn == nil {
		return guard.Invalid("WithSkip", "nil function")
	}
	return guard.WithSkip(func(r keyfuncs.Request) bool { return fn(Request(r)) })
}

// WithDeniedHandler replaces the 429 response. h runs with the rate-limit
// headers and Retry-After already set on w and writes the status and body.
// Default: guard.DefaultDeniedHandler, 429 with a problem+json body.
func WithDeniedHandler(h func(w http.ResponseWriter, r *http.Request, d *guard.Denial)) Option {
	if h == nil {
		return guard.Invalid("WithDeniedHandler", "nil function")
	}
	return guard.WithDeniedHandler(func(w guard.Writer, r keyfuncs.Request, d *guard.Denial) error {
		x, ok := w.(*writer)
		if !ok {
			return guard.DefaultDeniedHandler(w, r, d)
		}
		h(x.w, Request(r), d)
		return nil
	})
}

// WithErrorHandler replaces the response to a request that cannot be
// decided; err wraps guard.ErrKey, ErrCost, ErrLimiter or ErrWait. h must
// not send err's text to the client. Default: guard.DefaultErrorHandler.
func WithErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	if h == nil {
		return guard.Invalid("WithErrorHandler", "nil function")
	}
	return guard.WithErrorHandler(func(w guard.Writer, r keyfuncs.Request, err error) error {
		x, ok := w.(*writer)
		if !ok {
			return guard.DefaultErrorHandler(w, r, err)
		}
		h(x.w, Request(r), err)
		return nil
	})
}

// WithHeaders selects the rate-limit headers. Default: guard.HeadersDraft11.
func WithHeaders(style guard.HeaderStyle) Option { return guard.WithHeaders(style) }

// WithLegacyReset selects how guard.HeadersLegacy sends X-RateLimit-Reset:
// seconds from now (guard.ResetDelta) or a Unix time (guard.ResetUnix).
// It is guard.WithLegacyReset. Default: guard.ResetDelta.
func WithLegacyReset(f guard.ResetFormat) Option { return guard.WithLegacyReset(f) }

// WithClock sets the clock of the dates the middleware sends: the Unix
// time of WithLegacyReset(guard.ResetUnix). Decisions use their Limiter's
// clock. It is guard.WithClock. Default: the wall clock.
func WithClock(clock core.Clock) Option { return guard.WithClock(clock) }

// WithDryRun decides, counts and sets headers but never blocks; see
// guard.WithDryRun. Default: false.
func WithDryRun(on bool) Option { return guard.WithDryRun(on) }

// WithMaxDelay bounds the LeakyBucket queueing wait. Default:
// guard.DefaultMaxDelay.
func WithMaxDelay(d time.Duration) Option { return guard.WithMaxDelay(d) }

// WithRefundOn refunds a request whose status matches, e.g.
// guard.ServerErrors. Default: none.
func WithRefundOn(match func(status int) bool) Option { return guard.WithRefundOn(match) }

// WithReportedCost lets the handler report its real cost with
// guard.ReportCost(r.Context(), n) or guard.AddCost. Default: off.
func WithReportedCost() Option { return guard.WithReportedCost() }

// WithResponseCost settles each request at the cost fn computes from its
// status and size. Default: none.
func WithResponseCost(fn func(guard.Result) int64) Option { return guard.WithResponseCost(fn) }

// WithOnDenied calls fn for every denial, dry run included. Default: none.
func WithOnDenied(fn func(r *http.Request, d *guard.Denial)) Option {
	if fn == nil {
		return guard.Invalid("WithOnDenied", "nil function")
	}
	return guard.WithOnDenied(func(r keyfuncs.Request, d *guard.Denial) { fn(Request(r), d) })
}

// WithOnError calls fn with every error, for logs. Default: none.
func WithOnError(fn func(r *http.Request, err error)) Option {
	if fn == nil {
		return guard.Invalid("WithOnError", "nil function")
	}
	return guard.WithOnError(func(r keyfuncs.Request, err error) { fn(Request(r), err) })
}

// WithAdaptive applies the adaptive concurrency limit lim (package
// adaptive) before the rules: a request it sheds gets 503 with
// Retry-After and a problem+json body, and is charged nothing by the
// rules. With it, New accepts a nil *core.Limiter: the adaptive limit
// alone. It is guard.WithAdaptive. Default: none.
func WithAdaptive(lim *adaptive.Limiter) Option { return guard.WithAdaptive(lim) }

// WithPriority chooses each request's priority for the adaptive limit:
// adaptive.Sheddable requests are shed first. It is guard.WithPriority
// over *http.Request. Default: every request adaptive.Critical.
func WithPriority(fn func(r *http.Request) adaptive.Priority) Option {
	if fn == nil {
		return guard.Invalid("WithPriority", "nil function")
	}
	return guard.WithPriority(func(r keyfuncs.Request) adaptive.Priority { return fn(Request(r)) })
}
