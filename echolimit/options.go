package echolimit

import (
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// An Option configures the middleware. It is a guard.Option: every option
// of package guard works here too; those below are the same options, or
// their translations to echo types. An option given a nil function makes
// New panic, naming the option: leave it out for its default. (Config's
// nil fields, echo's idiom, do mean their defaults.)
type Option = guard.Option

// WithKeyFunc sets the key function, over echo.Context: who is limited.
// A key from an earlier middleware is c.Get("user") away:
//
//	echolimit.WithKeyFunc(func(c echo.Context) (string, error) {
//		claims, ok := c.Get("user").(*Claims)
//		if !ok {
//			return "", keyfuncs.ErrNoKey
//		}
//		return claims.Subject, nil
//	})
//
// An error or an empty key fails the request, by default with 400 (see
// guard.ErrorStatus); it never passes unlimited. For the framework-neutral
// functions of keyfuncs, use WithKey. Default: keyfuncs.IP(), the peer
// address.
func WithKeyFunc(fn func(c echo.Context) (string, error)) Option {
	if fn == nil {
		return guard.Invalid("WithKeyFunc", "nil function")
	}
	return guard.WithKey(KeyFunc(fn))
}

// WithKey sets the key function to one of package keyfuncs, or to Value:
//
//	echolimit.WithKey(keyfuncs.IP(keyfuncs.TrustProxies(lb)))  // behind a load balancer
//	echolimit.WithKey(keyfuncs.Join("|", keyfuncs.IP(), keyfuncs.Route()))
//	echolimit.WithKey(echolimit.Value("user"))                 // c.Get("user")
//
// It is guard.WithKey. Default: keyfuncs.IP().
func WithKey(fn keyfuncs.Func) Option { return guard.WithKey(fn) }

// WithRule adds a further limiter applied to its own key, after lim: see
// guard.WithRule. Use KeyFunc for a key function over echo.Context, and
// guard.Optional to exempt requests without the key, and keyfuncs.IP()
// for a rule per client address. Default: none.
func WithRule(lim *core.Limiter, fn keyfuncs.Func) Option { return guard.WithRule(lim, fn) }

// WithCost sets the static cost of every request, e.g. 5 for a costly
// route. It must not be negative. Default: 1.
func WithCost(n int64) Option { return guard.WithCost(n) }

// WithCostFunc computes the cost of each request, replacing WithCost. An
// error fails the request with 400, a negative cost with 500 (see
// guard.ErrorStatus). Default: none.
func WithCostFunc(fn func(c echo.Context) (int64, error)) Option {
	if fn == nil {
		return guard.Invalid("WithCostFunc", "nil function")
	}
	return guard.WithCostFunc(func(r keyfuncs.Request) (int64, error) { return fn(Context(r)) })
}

// WithSkipper passes requests for which skip reports true straight to the
// next handler, unlimited, uncounted and without rate-limit headers:
// echo's Skipper, e.g.
//
//	echolimit.WithSkipper(func(c echo.Context) bool { return c.Path() == "/health" })
//
// Default: middleware.DefaultSkipper, which skips nothing.
func WithSkipper(skip middleware.Skipper) Option {
	if skip == nil {
		return guard.Invalid("WithSkipper", "nil function")
	}
	return guard.WithSkip(func(r keyfuncs.Request) bool { return skip(Context(r)) })
}

// WithDeniedHandler replaces the 429 response. h runs with the rate-limit
// headers and Retry-After already set on c.Response(); it either writes a
// response (c.JSON(http.StatusTooManyRequests, ...)) and returns nil, or
// returns an error, such as an *echo.HTTPError, that the middleware returns
// for e.HTTPErrorHandler to answer. Default: guard.DefaultDeniedHandler,
// 429 with a problem+json body.
func WithDeniedHandler(h func(c echo.Context, d *guard.Denial) error) Option {
	if h == nil {
		return guard.Invalid("WithDeniedHandler", "nil function")
	}
	return guard.WithDeniedHandler(func(w guard.Writer, r keyfuncs.Request, d *guard.Denial) error {
		x, ok := w.(*gate)
		if !ok {
			return guard.DefaultDeniedHandler(w, r, d)
		}
		return h(x.c, d)
	})
}

// WithErrorHandler replaces the response to a request that cannot be
// decided; err wraps guard.ErrKey, ErrCost, ErrLimiter or ErrWait (see
// guard.ErrorStatus for the status each deserves). h writes a response and
// returns nil, or returns an error for e.HTTPErrorHandler. It must not send
// err's text to the client, nor return err itself: echo's default
// HTTPErrorHandler sends the text of a plain error when e.Debug is set.
// Return echo.NewHTTPError(guard.ErrorStatus(err)) instead. Default:
// guard.DefaultErrorHandler, a generic problem+json body.
func WithErrorHandler(h func(c echo.Context, err error) error) Option {
	if h == nil {
		return guard.Invalid("WithErrorHandler", "nil function")
	}
	return guard.WithErrorHandler(func(w guard.Writer, r keyfuncs.Request, err error) error {
		x, ok := w.(*gate)
		if !ok {
			return guard.DefaultErrorHandler(w, r, err)
		}
		return h(x.c, err)
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

// WithMaxDelay bounds the LeakyBucket queueing wait, which ends early,
// with 503, when the request's context does. Default:
// guard.DefaultMaxDelay.
func WithMaxDelay(d time.Duration) Option { return guard.WithMaxDelay(d) }

// WithRefundOn refunds a request whose status matches, e.g.
// guard.ServerErrors. The status is the one sent: a handler's error is
// committed with c.Error first (see New). Default: none.
func WithRefundOn(match func(status int) bool) Option { return guard.WithRefundOn(match) }

// WithReportedCost lets the handler report its real cost with
// ReportCost(c, n), AddCost(c, n), or guard.ReportCost on
// c.Request().Context(). Default: off.
func WithReportedCost() Option { return guard.WithReportedCost() }

// WithResponseCost settles each request at the cost fn computes from its
// status and size (c.Response().Status and Size, after a handler's error
// is committed). Default: none.
func WithResponseCost(fn func(guard.Result) int64) Option { return guard.WithResponseCost(fn) }

// WithOnDenied calls fn for every denial, dry run included, before the
// denied handler; for metrics and logs. d is valid only during the call.
// Default: none.
func WithOnDenied(fn func(c echo.Context, d *guard.Denial)) Option {
	if fn == nil {
		return guard.Invalid("WithOnDenied", "nil function")
	}
	return guard.WithOnDenied(func(r keyfuncs.Request, d *guard.Denial) { fn(Context(r), d) })
}

// WithOnError calls fn with every error, including those of dry run and
// of refunds after the handler, for logs. Default: none.
func WithOnError(fn func(c echo.Context, err error)) Option {
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
// over echo.Context. Default: every request adaptive.Critical.
func WithPriority(fn func(c echo.Context) adaptive.Priority) Option {
	if fn == nil {
		return guard.Invalid("WithPriority", "nil function")
	}
	return guard.WithPriority(func(r keyfuncs.Request) adaptive.Priority { return fn(Context(r)) })
}
