package fiberlimit

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
)

// New returns a fiber.Handler that limits requests with lim: by peer IP
// (keyfuncs.IP()), at cost 1, with draft-11 RateLimit headers, unless
// options say otherwise. Use it app-wide, on a group, or on one route:
//
//	app.Use(fiberlimit.New(lim))
//	api := app.Group("/api", fiberlimit.New(apiLim, fiberlimit.WithKeyFunc(userKey)))
//	app.Post("/search", fiberlimit.New(searchLim, fiberlimit.WithCost(5)), search)
//
// The rate-limit headers are set before the next handler runs. A denied
// request gets 429 with Retry-After and a problem+json body; a request that
// cannot be decided gets the ErrorHandler's response (see
// guard.ErrorStatus). Both end the chain: the handler returns nil, or the
// error of a DeniedHandler or ErrorHandler of WithDeniedHandler or
// WithErrorHandler, which fiber's ErrorHandler then answers.
//
// The next handlers run with c.UserContext() set to the context the Guard
// passes on (it carries the cost slot of WithReportedCost); the previous
// user context is restored when they return. Their error is returned
// unchanged, except when WithRefundOn or WithResponseCost need the status
// actually sent: then, as fiber's logger middleware does, the error is
// committed at once through the app's ErrorHandler (c.App().ErrorHandler,
// with a 500 if that fails too), the request is settled on the status and
// body it produced, and the handler returns nil.
//
// New panics if lim is nil or an option is invalid (a nil function, a
// negative cost or max delay, a nil limiter in WithRule, an unknown header
// style), with a message that names the option: programmer errors, caught
// at startup. The handler is safe for concurrent use.
func New(lim *core.Limiter, opts ...Option) fiber.Handler {
	if lim == nil {
		panic("fiberlimit: New: nil *core.Limiter")
	}
	g, err := guard.New(lim, opts...)
	if err != nil {
		panic("fiberlimit: New: " + err.Error())
	}
	track := g.NeedsResult()
	return func(c *fiber.Ctx) error {
		v := view{c}
		prev := c.UserContext()
		var nextErr error
		err := g.Serve(v, v, func(ctx context.Context) guard.Result {
			c.SetUserContext(ctx)
			nextErr = c.Next()
			c.SetUserContext(prev)
			if !track {
				return guard.Result{}
			}
			if nextErr != nil {
				commit(c, nextErr)
				nextErr = nil
			}
			return result(c)
		})
		if err != nil {
			return err
		}
		return nextErr
	}
}

// commit answers err through the app's ErrorHandler now, as fiber does at
// the end of the chain, so that the response holds the status fiber will
// send.
func commit(c *fiber.Ctx, err error) {
	if c.App().ErrorHandler(c, err) != nil {
		_ = c.SendStatus(fiber.StatusInternalServerError)
	}
}

// result returns the status and body size of c's response. A body stream
// (SendStream, SendFile) is not read: its size is the Content-Length it
// declares, or 0 when unknown.
func result(c *fiber.Ctx) guard.Result {
	resp := c.Response()
	var n int64
	if resp.IsBodyStream() {
		n = max(int64(resp.Header.ContentLength()), 0)
	} else {
		n = int64(len(resp.Body()))
	}
	return guard.Result{Status: resp.StatusCode(), Bytes: n}
}
