package ginlimit_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/ginlimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

type discard = guardtest.Discard

var benchLimiter = guardtest.BenchLimiter

// router returns a gin engine with one route, /items/:id, answering 204,
// behind mw when there is one.
func router(mw ...gin.HandlerFunc) *gin.Engine {
	r := gin.New()
	r.Use(mw...)
	r.GET("/items/:id", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	return r
}

func serve(b *testing.B, h http.Handler, reqs []*http.Request) {
	b.Helper()
	w := &discard{H: make(http.Header, 4)}
	b.ReportAllocs()
	start := guardtest.CPUTime()
	for i := 0; b.Loop(); i++ {
		clear(w.H)
		h.ServeHTTP(w, reqs[i%len(reqs)])
	}
	guardtest.ReportCPU(b, start)
}

func requests(n int) []*http.Request { return guardtest.Requests(n, "/items/42") }

// BenchmarkMiddleware compares a gin router with no middleware with the
// same router behind one limit: draft-11 headers, memstore, one client.
// The difference is the middleware's overhead per request.
func BenchmarkMiddleware(b *testing.B) {
	reqs := requests(1)
	b.Run("bare", func(b *testing.B) { serve(b, router(), reqs) })
	b.Run("limiter-alone", func(b *testing.B) { guardtest.BenchDecision(b, benchLimiter(b), "10.0.0.0") })
	b.Run("limited", func(b *testing.B) { serve(b, router(ginlimit.New(benchLimiter(b))), reqs) })
	b.Run("limited-three-limits", func(b *testing.B) { serve(b, router(ginlimit.New(guardtest.BenchThreeLimits(b))), reqs) })
	b.Run("limited-no-headers", func(b *testing.B) {
		serve(b, router(ginlimit.New(benchLimiter(b), ginlimit.WithHeaders(guard.HeadersNone))), reqs)
	})
	b.Run("limited-settle", func(b *testing.B) {
		serve(b, router(ginlimit.New(benchLimiter(b), ginlimit.WithRefundOn(guard.ServerErrors))), reqs)
	})
	b.Run("limited-reported-cost", func(b *testing.B) {
		serve(b, router(ginlimit.New(benchLimiter(b), ginlimit.WithReportedCost())), reqs)
	})
	b.Run("limited-gin-key", func(b *testing.B) {
		key := func(c *gin.Context) (string, error) { return c.Param("id"), nil }
		serve(b, router(ginlimit.New(benchLimiter(b), ginlimit.WithKeyFunc(key))), reqs)
	})
}

// BenchmarkMiddlewareParallel is BenchmarkMiddleware under b.RunParallel,
// over 100k distinct clients.
func BenchmarkMiddlewareParallel(b *testing.B) {
	reqs := requests(100_000)
	checkDistinct(b, reqs)
	run := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := &discard{H: make(http.Header, 4)}
			i := rand.IntN(len(reqs))
			for pb.Next() {
				clear(w.H)
				h.ServeHTTP(w, reqs[i%len(reqs)])
				i++
			}
		})
	}
	b.Run("bare", func(b *testing.B) { run(b, router()) })
	b.Run("limited", func(b *testing.B) { run(b, router(ginlimit.New(benchLimiter(b)))) })
}

// BenchmarkMiddlewareKeys varies the number of distinct clients.
func BenchmarkMiddlewareKeys(b *testing.B) {
	for _, n := range []int{1, 1_000, 100_000} {
		reqs := requests(n)
		checkDistinct(b, reqs)
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) { serve(b, router(ginlimit.New(benchLimiter(b))), reqs) })
	}
}

// checkDistinct fails the benchmark unless every request has its own key.
func checkDistinct(b *testing.B, reqs []*http.Request) {
	b.Helper()
	seen := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		k, err := keyfuncs.IP()(keyfuncs.FromHTTP(r))
		if err != nil || seen[k] {
			b.Fatalf("key %q of %s: duplicate or error %v", k, r.RemoteAddr, err)
		}
		seen[k] = true
	}
}

// TestAllocationsPerRequest pins what BenchmarkMiddleware measures: with
// one limit and draft-11 headers, a request costs at most the 2
// allocations of DESIGN §5 (it costs a fraction of one: writers are
// pooled, RateLimit-Policy's value is kept per route, and RateLimit's
// carved out of chunks shared by many responses).
func TestAllocationsPerRequest(t *testing.T) {
	h := router(ginlimit.New(benchLimiter(t)))
	r := requests(1)[0]
	w := &discard{H: make(http.Header, 4)}
	got := testing.AllocsPerRun(1000, func() {
		clear(w.H)
		h.ServeHTTP(w, r)
	})
	if got > 2 {
		t.Errorf("allocations per request = %v, want at most 2", got)
	}
	if w.H.Get(guard.HeaderRateLimit) == "" {
		t.Errorf("no RateLimit header: the request did not take the path measured")
	}
}
