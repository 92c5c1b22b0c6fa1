package ginlimit

import (
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// An Option configures the middleware. It is a guard.Option: every option
// of package guard works here too, including those over keyfuncs.Request
// (guard.WithCostFunc, guard.WithSkip, ...). Those below are the same
// options, or their translations to *gin.Context. An option given a nil
// function makes New panic, naming the option: leave it out for its
// default.
type Option = guard.Option

// WithKeyFunc sets the key function, over *gin.Context: who is limited,
// e.g. a user ID an authentication middleware stored with c.Set:
//
//	ginlimit.WithKeyFunc(func(c *gin.Context) (string, error) {
//		return c.GetString("user"), nil
//	})
//
// (keyfuncs.ContextValue reads c.Request.Context(), not the values of
// c.Set.) A key function's error, or an empty key, fails the request with
// 400 (see guard.ErrorStatus); it never passes unlimited. For the
// framework-neutral functions of keyfuncs, use WithKey. Default:
// keyfuncs.IP(), the peer address.
func WithKeyFunc(fn func(c *gin.Context) (string, error)) Option {
	if fn == nil {
		return guard.Invalid("WithKeyFunc", "nil function")
	}
	return guard.WithKey(KeyFunc(fn))
}

// WithKey sets the key function to one of package keyfuncs:
//
//	ginlimit.WithKey(keyfuncs.Header("X-API-Key"))
//	ginlimit.WithKey(keyfuncs.IP(keyfuncs.TrustProxies(lb))) // behind a load balancer
//
// For the client address behind proxies use keyfuncs.IP with
// TrustProxies: gin's ClientIP is not used (see the package
// documentation). It is guard.WithKey. Default: keyfuncs.IP().
func WithKey(fn keyfuncs.Func) Option { return guard.WithKey(fn) }

// WithRule adds a further limiter applied to its own key, after lim
// (keyfuncs.IP() for a rule per client address). If a later rule denies,
// what the earlier rules took is refunded: see guard.WithRule. Use KeyFunc
// for a key function over *gin.Context, and guard.Optional to exempt
// requests without the key, e.g. anonymous ones from a per-user rule.
// Default: none.
func WithRule(lim *core.Limiter, fn keyfuncs.Func) Option { return guard.WithRule(lim, fn) }

// WithCost sets the static cost of every request, in cost units; it must
// not be negative. Default: 1.
func WithCost(n int64) Option { return guard.WithCost(n) }

// WithCostFunc computes the cost of each request, replacing WithCost. An
// error fails the request with 400, a negative cost with 500; see
// guard.WithCostFunc. Default: none.
func WithCostFunc(fn func(c *gin.Context) (int64, error)) Option {
	if fn == nil {
		return guard.Invalid("WithCostFunc", "nil function")
	}
	return guard.WithCostFunc(func(r keyfuncs.Request) (int64, error) { return fn(Context(r)) })
}

// WithSkip passes requests for which fn reports true straight to the rest
// of the chain: no key, no decision, no headers. Default: none.
func WithSkip(fn func(c *gin.Context) bool) Option {
	if fn == nil {
		return guard.Invalid("WithSkip", "nil function")
	}
	return guard.WithSkip(func(r keyfuncs.Request) bool { return fn(Context(r)) })
}

// WithDeniedHandler replaces the 429 response. h runs with the rate-limit
// headers and Retry-After already set on c.Writer, and writes the status
// and body the gin way (c.JSON, c.String, ...); the middleware then
// aborts the chain. Default: guard.DefaultDeniedHandler, 429 with a
// problem+json body.
func WithDeniedHandler(h func(c *gin.Context, d *guard.Denial)) Option {
	if h == nil {
		return guard.Invalid("WithDeniedHandler", "nil function")
	}
	return guard.WithDeniedHandler(func(w guard.Writer, r keyfuncs.Request, d *guard.Denial) error {
		c := Context(r)
		if c == nil {
			return guard.DefaultDeniedHandler(w, r, d)
		}
		h(c, d)
		return nil
	})
}

// WithErrorHandler replaces the response to a request that cannot be
// decided; err wraps guard.ErrKey, ErrCost, ErrLimiter or ErrWait, and
// guard.ErrorStatus(err) is the status the default answers with. h must
// not send err's text to the client; the middleware aborts the chain after
// it. Default: guard.DefaultErrorHandler, a generic problem+json body.
func WithErrorHandler(h func(c *gin.Context, err error)) Option {
	if h == nil {
		return guard.Invalid("WithErrorHandler", "nil function")
	}
	return guard.WithErrorHandler(func(w guard.Writer, r keyfuncs.Request, err error) error {
		c := Context(r)
		if c == nil {
			return guard.DefaultErrorHandler(w, r, err)
		}
		h(c, err)
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

// WithMaxDelay bounds how long a request admitted by a LeakyBucket limit
// waits its turn, cancelled with c.Request.Context(); a longer delay is
// denied. Default: guard.DefaultMaxDelay.
func WithMaxDelay(d time.Duration) Option { return guard.WithMaxDelay(d) }

// WithRefundOn refunds a request whose status (c.Writer.Status() after
// the chain) matches, e.g. guard.ServerErrors. Default: none.
func WithRefundOn(match func(status int) bool) Option { return guard.WithRefundOn(match) }

// WithReportedCost lets the handler report its real cost with
// ReportCost(c, n) or AddCost(c, n), or with guard.ReportCost on
// c.Request.Context(). It costs three allocations per request (the
// context, its cost slot and the shallow copy of c.Request).
// Default: off.
func WithReportedCost() Option { return guard.WithReportedCost() }

// WithResponseCost settles each request at the cost fn computes from the
// response: Result.Status is c.Writer.Status(), Result.Bytes
// c.Writer.Size() (0 when nothing was written). Default: none.
func WithResponseCost(fn func(guard.Result) int64) Option { return guard.WithResponseCost(fn) }

// WithOnDenied calls fn for every denial, dry run included, before the
// denied handler; for metrics and logs. d is valid only during the call.
// Default: none.
func WithOnDenied(fn func(c *gin.Context, d *guard.Denial)) Option {
	if fn == nil {
		return guard.Invalid("WithOnDenied", "nil function")
	}
	return guard.WithOnDenied(func(r keyfuncs.Request, d *guard.Denial) { fn(Context(r), d) })
}

// WithOnError calls fn with every error, those answered by the error
// handler, those of dry run and failed settlements after the handler; for
// logs (c.Error(err) hands it to gin's logger). Default: none.
func WithOnError(fn func(c *gin.Context, err error)) Option {
	if fn == nil {
		return guard.Invalid("WithOnError", "nil function")
	}
	return guard.WithOnError(func(r keyfuncs.Request, err error) { fn(Context(r), err) })
}

// WithAdaptive applies the adaptive concurrency limit lim (package
// adaptive) before the rules: a request it sheds gets 503 with
// Retry-After and a problem+json body, and is charged nothing by the
// rules. With it, New accepts a nil *core.Limiter: the adaptive limit
// alone. It is guard.WithAdaptive. Default: none.
func WithAdaptive(lim *adaptive.Limiter) Option { return guard.WithAdaptive(lim) }

// WithPriority chooses each request's priority for the adaptive limit:
// adaptive.Sheddable requests are shed first. It is guard.WithPriority
// over *gin.Context. Default: every request adaptive.Critical.
func WithPriority(fn func(c *gin.Context) adaptive.Priority) Option {
	if fn == nil {
		return guard.Invalid("WithPriority", "nil function")
	}
	return guard.WithPriority(func(r keyfuncs.Request) adaptive.Priority { return fn(Context(r)) })
}
