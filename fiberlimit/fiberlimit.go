package fiberlimit

import (
	"context"
	"errors"
	"sync"

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
// Stacked Tollgate middlewares act as one decision (see guard.Chain): the
// first one on a request's chain keeps the chain in c.Locals while the
// rest of fiber's chain runs, where the middlewares further in find it. A
// Tollgate middleware added with app.Use or to a group runs before fiber
// picks the route that answers, so a 429 it answers itself lists its own
// policies only, not those of the route's middleware (see
// guard.RoutePatterner).
//
// The next handlers run with c.UserContext() set to the context the Guard
// passes on: the request's, or with WithReportedCost one that carries the
// cost slot, and then the previous user context is restored when they
// return or panic (a context a handler set is kept otherwise). Their error
// is returned unchanged, except when WithRefundOn or WithResponseCost need
// the status actually sent: then, as fiber's logger middleware does, the
// error is committed at once through the app's ErrorHandler
// (c.App().ErrorHandler, with a 500 if that fails too), the request is
// settled on the status and body it produced, and the handler returns nil.
//
// New panics if lim is nil (unless WithAdaptive gives an adaptive limit,
// which then limits alone) or an option is invalid (a nil function, a
// negative cost or max delay, a nil limiter in WithRule, an unknown header
// style), with a message that names the option: programmer errors, caught
// at startup. The handler is safe for concurrent use.
func New(lim *core.Limiter, opts ...Option) fiber.Handler {
	g, err := guard.New(lim, opts...)
	if errors.Is(err, guard.ErrNilLimiter) {
		panic("fiberlimit: New: nil *core.Limiter (pass one, or WithAdaptive)")
	}
	if err != nil {
		panic("fiberlimit: New: " + err.Error())
	}
	track, reported := g.NeedsResult(), g.ReportsCost()
	return func(c *fiber.Ctx) error {
		st := states.Get().(*state)
		st.w.c = c
		st.w.chain, _ = c.Locals(chainKey{}).(*guard.Chain)
		first := st.w.chain == nil // the first Tollgate middleware of the request
		if first {
			st.w.chain = &st.chain
			c.Locals(chainKey{}, st.w.chain)
		}
		var nextErr error
		err := g.Serve(view{c}, &st.w, func(ctx context.Context) guard.Result {
			// The next handlers run under ctx. Without WithReportedCost
			// it is the user context already, and is left alone (setting
			// it and putting it back are two searches of the request's
			// user values); with it, it carries the cost slot, and the
			// previous context is put back once they return or panic.
			if reported {
				nextErr = nextUnder(c, ctx)
			} else {
				nextErr = c.Next()
			}
			if !track {
				return guard.Result{}
			}
			if nextErr != nil {
				commit(c, nextErr)
				nextErr = nil
			}
			return result(c)
		})
		if first {
			c.Locals(chainKey{}, nil)
		}
		st.release()
		if err != nil {
			return err
		}
		return nextErr
	}
}

// nextUnder runs the next handlers of c with ctx as the user context, and
// puts the previous one back when they return or panic.
func nextUnder(c *fiber.Ctx, ctx context.Context) error {
	prev := c.UserContext()
	c.SetUserContext(ctx)
	defer c.SetUserContext(prev)
	return c.Next()
}

// chainKey is the c.Locals key of the request's guard.Chain.
type chainKey struct{}

// state is what one middleware holds for one request: its writer and, for
// the first Tollgate middleware of the request, the chain, which the
// middlewares further in find in c.Locals. Nothing refers to it once the
// middleware returns (headers and bodies are copied into fasthttp's
// buffers), so it is pooled.
type state struct {
	w     writer
	chain guard.Chain
}

// states holds the states of requests that are over.
var states = sync.Pool{New: func() any { return new(state) }}

// release empties st and puts it back in the pool. Its Chain is empty
// already (the Guard's Serve gives back what it took); if it served the
// request, as the first middleware's, it keeps its state from now on
// (guard.Chain.Keep).
func (st *state) release() {
	if st.w.chain == &st.chain {
		st.chain.Keep()
	}
	st.w = writer{}
	states.Put(st)
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
