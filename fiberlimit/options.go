package fiberlimit

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// An Option configures the middleware. It is a guard.Option: every option
// of package guard works here too; those below are the same options, or
// their translations to fiber's types. An option given a nil function
// makes New panic, naming the option: leave it out for its default.
type Option = guard.Option

// WithKeyFunc sets the key function, over *fiber.Ctx: who is limited. The
// key is copied (see KeyFunc), so fn may return strings taken from c. An
// error, or an empty key, fails the request with 400 (see
// guard.ErrorStatus); it never passes unlimited. For the key functions of
// package keyfuncs use WithKey. Default: keyfuncs.IP(), the peer address.
func WithKeyFunc(fn func(c *fiber.Ctx) (string, error)) Option {
	if fn == nil {
		return guard.Invalid("WithKeyFunc", "nil function")
	}
	return guard.WithKey(KeyFunc(fn))
}

// WithKey sets the key function to one of package keyfuncs (or Locals, or
// KeyFunc): keyfuncs.Header("X-API-Key"), keyfuncs.IP with trusted
// proxies, keyfuncs.Join(...). It is guard.WithKey. keyfuncs.Route is
// the pattern of the route the middleware is mounted on: with app.Use, the
// Use prefix, shared by every route below it (see the package
// documentation). Default: keyfuncs.IP().
func WithKey(fn keyfuncs.Func) Option { return guard.WithKey(fn) }

// WithRule adds a further limiter applied to its own key, after lim: see
// guard.WithRule. Use KeyFunc or Locals for a key from the *fiber.Ctx, and
// keyfuncs.IP() for a rule per client address. Default: none.
func WithRule(lim *core.Limiter, fn keyfuncs.Func) Option { return guard.WithRule(lim, fn) }

// WithCost sets the static cost of every request, in cost units: a costly
// endpoint may charge 5. Default: 1.
func WithCost(n int64) Option { return guard.WithCost(n) }

// WithCostFunc computes the cost of each request, replacing WithCost. An
// error fails the request with 400, a negative cost with 500 (see
// guard.WithCostFunc). Default: none.
func WithCostFunc(fn func(c *fiber.Ctx) (int64, error)) Option {
	if fn == nil {
		return guard.Invalid("WithCostFunc", "nil function")
	}
	return guard.WithCostFunc(func(r keyfuncs.Request) (int64, error) { return fn(Ctx(r)) })
}

// WithNext passes requests for which next reports true straight to the next
// handler: no key, no decision, no headers. It is fiber's Config.Next, and
// guard.WithSkip over *fiber.Ctx (the last of the two given wins).
// Default: none, every request is limited.
func WithNext(next func(c *fiber.Ctx) bool) Option {
	if next == nil {
		return guard.Invalid("WithNext", "nil function")
	}
	return guard.WithSkip(func(r keyfuncs.Request) bool { return next(Ctx(r)) })
}

// WithDeniedHandler replaces the response to a denied request. h runs with
// the rate-limit headers and Retry-After already set and writes the status
// and body (c.Status(429).JSON(...)); an error it returns is answered by
// fiber's ErrorHandler, which sets its own status. d is valid only during
// the call; d.Key is a copy and may be kept. Default:
// guard.DefaultDeniedHandler, 429 with an application/problem+json body.
func WithDeniedHandler(h func(c *fiber.Ctx, d *guard.Denial) error) Option {
	if h == nil {
		return guard.Invalid("WithDeniedHandler", "nil function")
	}
	return guard.WithDeniedHandler(func(w guard.Writer, r keyfuncs.Request, d *guard.Denial) error {
		c := Ctx(r)
		if c == nil {
			return guard.DefaultDeniedHandler(w, r, d)
		}
		return h(c, d)
	})
}

// WithErrorHandler replaces the response to a request that cannot be
// decided: err wraps guard.ErrKey, ErrCost, ErrLimiter or ErrWait and the
// error behind it. h must not send err's text to the client, and so must
// not return err itself: fiber's DefaultErrorHandler would send its text.
// Return fiber.NewError(guard.ErrorStatus(err)) to let the app's
// ErrorHandler answer with a generic message, or write the response and
// return nil. Default: guard.DefaultErrorHandler, a generic
// application/problem+json body with the status of guard.ErrorStatus.
func WithErrorHandler(h func(c *fiber.Ctx, err error) error) Option {
	if h == nil {
		return guard.Invalid("WithErrorHandler", "nil function")
	}
	return guard.WithErrorHandler(func(w guard.Writer, r keyfuncs.Request, err error) error {
		c := Ctx(r)
		if c == nil {
			return guard.DefaultErrorHandler(w, r, err)
		}
		return h(c, err)
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

// WithMaxDelay bounds the LeakyBucket queueing wait, which is cancelled
// with c.UserContext() (see the package documentation: fasthttp does not
// cancel it when the client goes away). Default: guard.DefaultMaxDelay.
func WithMaxDelay(d time.Duration) Option { return guard.WithMaxDelay(d) }

// WithRefundOn refunds a request whose status matches, e.g.
// guard.ServerErrors. The status is the one fiber sends, a returned error
// included (see New). Default: none.
func WithRefundOn(match func(status int) bool) Option { return guard.WithRefundOn(match) }

// WithReportedCost lets the handler report its real cost with
// ReportCost(c, n) or AddCost. Default: off.
func WithReportedCost() Option { return guard.WithReportedCost() }

// WithResponseCost settles each request at the cost fn computes from its
// status and body size (Result.Bytes: the body fiber sends, or the
// Content-Length of a body stream). Default: none.
func WithResponseCost(fn func(guard.Result) int64) Option { return guard.WithResponseCost(fn) }

// WithOnDenied calls fn for every denial, dry run included, before the
// denied handler; for metrics and logs. c and d are valid only during the
// call; d.Key is a copy and may be kept. Default: none.
func WithOnDenied(fn func(c *fiber.Ctx, d *guard.Denial)) Option {
	if fn == nil {
		return guard.Invalid("WithOnDenied", "nil function")
	}
	return guard.WithOnDenied(func(r keyfuncs.Request, d *guard.Denial) { fn(Ctx(r), d) })
}

// WithOnError calls fn with every error, for logs: those the error handler
// then answers, those of dry run, and failed settlements after the handler.
// c is valid only during the call. Default: none.
func WithOnError(fn func(c *fiber.Ctx, err error)) Option {
	if fn == nil {
		return guard.Invalid("WithOnError", "nil function")
	}
	return guard.WithOnError(func(r keyfuncs.Request, err error) { fn(Ctx(r), err) })
}

// WithAdaptive applies the adaptive concurrency limit lim (package
// adaptive) before the rules: a request it sheds gets 503 with
// Retry-After and a problem+json body, and is charged nothing by the
// rules. With it, New accepts a nil *core.Limiter: the adaptive limit
// alone. It is guard.WithAdaptive. Default: none.
func WithAdaptive(lim *adaptive.Limiter) Option { return guard.WithAdaptive(lim) }

// WithPriority chooses each request's priority for the adaptive limit:
// adaptive.Sheddable requests are shed first. It is guard.WithPriority
// over *fiber.Ctx. Default: every request adaptive.Critical.
func WithPriority(fn func(c *fiber.Ctx) adaptive.Priority) Option {
	if fn == nil {
		return guard.Invalid("WithPriority", "nil function")
	}
	return guard.WithPriority(func(r keyfuncs.Request) adaptive.Priority { return fn(Ctx(r)) })
}
