package echolimit

import (
	"errors"
	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
)

// New returns echo middleware that limits requests with lim: by peer
// address (keyfuncs.IP()), at cost 1, with draft-11 RateLimit headers,
// unless options say otherwise. Use it app-wide, on a group, or on one
// route:
//
//	e.Use(echolimit.New(lim))
//	api := e.Group("/api", echolimit.New(apiLim, echolimit.WithKeyFunc(userKey)))
//	e.POST("/search", search, echolimit.New(searchLim, echolimit.WithCost(5)))
//
// The rate-limit headers are set on c.Response() before the next handler
// runs. A denied request gets 429 with Retry-After and a problem+json body,
// written by the middleware, which then returns nil; a request that cannot
// be decided gets the ErrorHandler's response (see guard.ErrorStatus), and
// error text never reaches the client. A WithDeniedHandler or
// WithErrorHandler function may instead return an error (such as an
// *echo.HTTPError) for e.HTTPErrorHandler to answer: the middleware returns
// it.
//
// The next handler's error is returned unchanged, for echo to handle,
// except when the Guard settles on the response's status (WithRefundOn,
// WithResponseCost): then the middleware commits it with c.Error(err),
// as echo's Logger middleware does, so that the status settled is the one
// e.HTTPErrorHandler sent, and returns nil. WithReportedCost makes the
// middleware replace c.Request() with a copy carrying the cost slot in its
// context; handlers report with ReportCost(c, n) or
// guard.ReportCost(c.Request().Context(), n).
//
// Stacked Tollgate middlewares act as one decision (see guard.Chain): the
// first one on a request's chain carries the chain in a thin wrapper of
// c.Response().Writer while the rest of echo's chain runs (restored when
// it returns), where the middlewares further in, and a nethttp middleware
// in an http.Handler mounted with echo.WrapHandler, find it. An echo
// server mounted in a nethttp middleware finds that middleware's chain
// through c.Response().
//
// Register the middleware with e.Use, Group or a route, not e.Pre: before
// routing c.Path() is empty, and keyfuncs.Route has no key.
//
// New panics if lim is nil (unless WithAdaptive gives an adaptive limit,
// which then limits alone) or an option is invalid (a nil function, a
// negative cost or max delay, a nil limiter in WithRule, an unknown header
// style), with a message that names the option: programmer errors, caught
// at startup. The middleware is safe for concurrent use.
func New(lim *core.Limiter, opts ...Option) echo.MiddlewareFunc {
	g, err := guard.New(lim, opts...)
	if errors.Is(err, guard.ErrNilLimiter) {
		panic("echolimit: New: nil *core.Limiter (pass one, or WithAdaptive)")
	}
	if err != nil {
		panic("echolimit: New: " + err.Error())
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		// echo builds the chain of e.Use middleware per request: keep this
		// closure small.
		return func(c echo.Context) error {
			x := gates.Get().(*gate)
			*x = gate{c: c, next: next, track: g.NeedsResult(), reported: g.ReportsCost(), own: x.own}
			if x.rw.chain = guard.FindChain(c.Response().Writer); x.rw.chain == nil {
				// The first Tollgate middleware of the request.
				x.rw.chain, x.rw.prev = &x.own, c.Response().Writer
			}
			err := g.Serve(x, x, x.call)
			if err == nil {
				err = x.err
			}
			x.release()
			return err
		}
	}
}
