package bench

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/httprate"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/nethttp"
)

// BenchmarkHTTP measures the net/http middleware against go-chi/httprate
// (what net/http and chi users otherwise pick) and the bare handler: one
// limit, sliding window, keyed by client IP, every request allowed,
// Tollgate with its default draft-11 headers (httprate sends its
// X-RateLimit-* headers by default too), and a floor: the least such a
// middleware does (floorMiddleware). The framework adapters measure
// themselves against their frameworks' own limiters in their modules.
func BenchmarkHTTP(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	store := memstore.New()
	b.Cleanup(func() { store.Close() })
	lim, err := core.New(store, core.PerSecond(10_000_000))
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		lib string
		h   http.Handler
	}{
		{"bare", ok},
		{"tollgate", nethttp.New(lim)(ok)},
		{"httprate", httprate.LimitByIP(10_000_000, time.Second)(ok)},
		{"floor", floorMiddleware(10_000_000, time.Second, ok)},
	}
	for _, c := range cases {
		b.Run("lib="+c.lib, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = "192.0.2.7:4321"
			w := &sink{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				c.h.ServeHTTP(w, req)
				if w.code != http.StatusOK {
					b.Fatalf("status %d, want 200", w.code)
				}
			}
		})
	}
}

// sink is a reusable ResponseWriter, so the benchmark measures the
// middleware and not httptest.ResponseRecorder's allocations.
type sink struct {
	h    http.Header
	code int
}

func (s *sink) Header() http.Header         { return s.h }
func (s *sink) Write(p []byte) (int, error) { return len(p), nil }
func (s *sink) WriteHeader(code int)        { s.code = code }
