package ginlimit

import (
	"context"
	"errors"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
)

// New returns a gin middleware that limits requests with lim: by client
// IP (keyfuncs.IP(), the peer address), at cost 1, with draft-11
// RateLimit headers, unless options say otherwise. Use it app-wide, on a
// group, or on one route:
//
//	r.Use(ginlimit.New(lim))
//	api := r.Group("/api", ginlimit.New(apiLim))
//	r.POST("/search", ginlimit.New(searchLim, ginlimit.WithCost(5)), search)
//
// Stacked Tollgate middlewares act as one decision (see guard.Chain): the
// first one on a request's chain carries the chain in a thin wrapper of
// c.Writer while the rest of gin's chain runs (restored when it returns),
// where the middlewares further in, and a nethttp middleware in an
// http.Handler mounted with gin.WrapH, find it. A gin engine mounted in a
// nethttp middleware finds that middleware's chain through c.Writer.
//
// The rate-limit headers are set before the rest of the chain runs. A
// denied request gets 429 with Retry-After and a problem+json body (or the
// response of WithDeniedHandler), a request that cannot be decided the
// ErrorHandler's response (see guard.ErrorStatus); either way the chain is
// aborted with c.Abort, so no later handler runs. Otherwise the middleware
// calls c.Next, and afterwards settles the request (WithRefundOn,
// WithResponseCost) from c.Writer.Status() and c.Writer.Size(). An error
// writing the response is added to c.Errors; no error text is ever sent
// to the client.
//
// When the Guard passes a context of its own to the rest of the chain
// (WithReportedCost), c.Request is replaced by c.Request.WithContext, so
// that guard.ReportCost(c.Request.Context(), n), or ReportCost(c, n),
// reaches it.
//
// New panics if lim is nil (unless WithAdaptive gives an adaptive limit,
// which then limits alone) or an option is invalid (a nil function, a
// negative cost or max delay, a nil limiter in WithRule, an unknown header
// style), with a message that names the option: programmer errors, caught
// at startup. The middleware is safe for concurrent use.
func New(lim *core.Limiter, opts ...Option) gin.HandlerFunc {
	g, err := guard.New(lim, opts...)
	if errors.Is(err, guard.ErrNilLimiter) {
		panic("ginlimit: New: nil *core.Limiter (pass one, or WithAdaptive)")
	}
	if err != nil {
		panic("ginlimit: New: " + err.Error())
	}
	track, reported := g.NeedsResult(), g.ReportsCost() // only with reported is Next's context not the request's
	return func(c *gin.Context) {
		x := writers.Get().(*writer)
		*x = writer{c: c, chain: guard.FindChain(c.Writer), own: x.own}
		if x.chain == nil { // the first Tollgate middleware of the request
			x.chain = &x.own
			x.ResponseWriter = c.Writer
			c.Writer = x
		}
		passed := false
		err := g.Serve(request{c}, x, func(ctx context.Context) guard.Result {
			passed = true
			if reported {
				c.Request = c.Request.WithContext(ctx)
			}
			c.Next()
			if !track {
				return guard.Result{}
			}
			return guard.Result{Status: c.Writer.Status(), Bytes: int64(max(c.Writer.Size(), 0))}
		})
		reuse := x.ResponseWriter == nil // never installed: nothing but Serve used it
		if x.ResponseWriter != nil && c.Writer == gin.ResponseWriter(x) {
			c.Writer = x.ResponseWriter // unless a middleware further in replaced it for good
			reuse = true
		}
		if reuse {
			if x.chain == &x.own { // the first: its Chain keeps its state from now on
				x.own.Keep()
			}
			*x = writer{own: x.own}
			writers.Put(x)
		}
		if !passed {
			c.Abort()
		}
		if err != nil {
			_ = c.Error(err)
		}
	}
}

// ReportCost reports n as the real cost of the request of c, for a Guard
// built with WithReportedCost: it is guard.ReportCost(c.Request.Context(),
// n). Use it from the handler, or from a goroutine with c.Copy(), until the
// handler returns. It reports whether the request carries a cost slot.
func ReportCost(c *gin.Context, n int64) bool { return guard.ReportCost(c.Request.Context(), n) }

// AddCost adds n to the real cost of the request of c; it is
// guard.AddCost(c.Request.Context(), n). See ReportCost.
func AddCost(c *gin.Context, n int64) bool { return guard.AddCost(c.Request.Context(), n) }
