package nethttp

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
)

// New returns middleware that limits requests with lim: by client IP
// (keyfuncs.IP()), at cost 1, with draft-11 RateLimit headers, unless
// options say otherwise. Wrap a whole mux for an app-wide limit, or one
// handler for a per-route limit:
//
//	mux.Handle("POST /search", nethttp.New(searchLim, nethttp.WithCost(5))(search))
//
// The rate-limit headers are set before the handler runs. A denied request
// gets 429 with Retry-After and a problem+json body; a request that cannot
// be decided gets the ErrorHandler's response (see guard.ErrorStatus).
//
// The handler receives a thin wrapper of the http.ResponseWriter that
// keeps Flush, Hijack, ReadFrom and Unwrap (for http.ResponseController)
// working, records the status and size when WithRefundOn or
// WithResponseCost need them, and carries the request's guard.Chain: a
// Tollgate middleware further in (of this package, or a gin or echo
// engine mounted inside) finds it by unwrapping the writer it receives,
// and the two act as one decision (see guard.Chain). As net/http requires
// of any ResponseWriter, the handler must not use it once it returns:
// wrappers are reused.
//
// New panics if lim is nil (unless WithAdaptive gives an adaptive limit,
// which then limits alone) or an option is invalid (a nil function, a
// negative cost or max delay, a nil limiter in WithRule, an unknown header
// style), with a message that names the option: programmer errors, caught
// at startup. The middleware is
// safe for concurrent use.
func New(lim *core.Limiter, opts ...Option) func(http.Handler) http.Handler {
	g, err := guard.New(lim, opts...)
	if errors.Is(err, guard.ErrNilLimiter) {
		panic("nethttp: New: nil *core.Limiter (pass one, or WithAdaptive)")
	}
	if err != nil {
		panic("nethttp: New: " + err.Error())
	}
	reported := g.ReportsCost() // only then is Next's context not the request's
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var x *writer
			var rw http.ResponseWriter
			if canHijack(w) {
				hx := hijackWriters.Get().(*hijackWriter)
				hx.writer = writer{w: w, own: hx.own}
				defer func() { hx.reset(); hijackWriters.Put(hx) }()
				x, rw = &hx.writer, hx
			} else {
				x = writers.Get().(*writer)
				*x = writer{w: w, own: x.own}
				defer func() { x.reset(); writers.Put(x) }()
				rw = x
			}
			x.chain = guard.FindChain(w)
			if x.chain == nil {
				x.chain = &x.own
			}
			_ = g.Serve(request{r}, x, func(ctx context.Context) guard.Result {
				if reported {
					r = r.WithContext(ctx)
				}
				next.ServeHTTP(rw, r)
				return x.result()
			})
		})
	}
}

// writers and hijackWriters hold the writers of requests that are over:
// a request takes one and gives it back when its middleware returns (see
// writer).
var (
	writers       = sync.Pool{New: func() any { return new(writer) }}
	hijackWriters = sync.Pool{New: func() any { return new(hijackWriter) }}
)
