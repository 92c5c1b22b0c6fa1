package conformance

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
	"github.com/tollgate/tollgate/nethttp"
)

// TestConformanceChi runs the shared table with the middleware in a chi
// router: app-wide with r.Use, on the group with r.Route's r.Use, on the
// route with r.With. chi routes after its r.Use middleware runs, so the
// table runs with Run, not RunKnownRoutes.
func TestConformanceChi(t *testing.T) {
	guardtest.Run(t, buildChi, checkHeaders)
}

// TestConformanceChiLeased runs the table with leases on (package lease).
func TestConformanceChiLeased(t *testing.T) {
	guardtest.RunLeased(t, buildChi, false, checkHeaders)
}

// TestInFlightChi holds concurrency limits to the requests in the handler,
// panics included.
func TestInFlightChi(t *testing.T) { guardtest.RunInFlight(t, buildChi) }

// buildChi mounts cfg's layers in a chi router.
func buildChi(t *testing.T, cfg guardtest.Config) http.Handler {
	r := chi.NewRouter()
	r.Use(middlewares(cfg.In(guardtest.AppWide))...)
	r.Route(guardtest.GroupPrefix, func(r chi.Router) {
		r.Use(middlewares(cfg.In(guardtest.Grouped))...)
		r.With(middlewares(cfg.In(guardtest.OnRoute))...).Handle(guardtest.RoutePath[len(guardtest.GroupPrefix):], cfg.App)
		r.Handle(guardtest.GroupPath[len(guardtest.GroupPrefix):], cfg.App)
	})
	r.Handle("/*", cfg.App)
	return r
}

// middlewares returns the middlewares of layers, outermost first.
func middlewares(layers []guardtest.Layer) []func(http.Handler) http.Handler {
	ms := make([]func(http.Handler) http.Handler, 0, len(layers))
	for _, l := range layers {
		ms = append(ms, nethttp.New(l.Limiter, l.Options...))
	}
	return ms
}

func limiter(t *testing.T, limits ...core.Limit) *core.Limiter {
	t.Helper()
	clock := guardtest.NewClock(guardtest.Epoch)
	st := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	t.Cleanup(func() { st.Close() })
	opts := []core.Option{core.WithClock(clock)}
	for _, l := range limits {
		opts = append(opts, l)
	}
	lim, err := core.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// TestChiPerRouteAndGroup checks the chi idioms: r.With for one route,
// r.Group for several, and chi's own middleware around ours (RealIP
// rewrites RemoteAddr before keyfuncs.IP reads it; the response wrapper
// chi installs keeps working with settle).
func TestChiPerRouteAndGroup(t *testing.T) {
	search := limiter(t, core.PerMinute(10).WithAlgorithm(core.FixedWindow).Named("search"))
	api := limiter(t, core.PerMinute(2).WithAlgorithm(core.FixedWindow).Named("api"))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })

	r := chi.NewRouter()
	r.Use(middleware.RealIP) // trusts X-Real-IP: only behind a proxy that sets it
	r.With(nethttp.New(search, nethttp.WithCost(5))).Post("/search", ok)
	r.Group(func(r chi.Router) {
		r.Use(nethttp.New(api, nethttp.WithRefundOn(guard.ServerErrors)))
		r.Get("/api/a", ok)
		r.Get("/api/fail", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	})
	r.Get("/free", ok)

	steps := []struct {
		method, path, realIP string
		status               int
		rateLimit            string
	}{
		{"POST", "/search", "203.0.113.1", 200, `"search";r=5;t=60`},
		{"POST", "/search", "203.0.113.1", 200, `"search";r=0;t=60`},
		{"POST", "/search", "203.0.113.1", 429, `"search";r=0;t=60`},
		{"POST", "/search", "203.0.113.2", 200, `"search";r=5;t=60`},
		{"GET", "/api/fail", "203.0.113.1", 500, `"api";r=1;t=60`},
		{"GET", "/api/a", "203.0.113.1", 200, `"api";r=1;t=60`},
		{"GET", "/api/a", "203.0.113.1", 200, `"api";r=0;t=60`},
		{"GET", "/api/a", "203.0.113.1", 429, `"api";r=0;t=60`},
		{"GET", "/free", "203.0.113.1", 200, ""},
	}
	for i, s := range steps {
		req := httptest.NewRequest(s.method, s.path, nil)
		req.Header.Set("X-Real-IP", s.realIP)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if rec.Code != s.status || rec.Header().Get("RateLimit") != s.rateLimit {
			t.Errorf("step %d %s %s: %d %q, want %d %q", i, s.method, s.path, rec.Code, rec.Header().Get("RateLimit"), s.status, s.rateLimit)
		}
	}
}

// TestChiRoutePatternKey keys on chi's route pattern through a custom key
// function: chi's pattern is known to middleware registered with r.With
// or inside a route, after routing.
func TestChiRoutePatternKey(t *testing.T) {
	lim := limiter(t, core.PerMinute(2).WithAlgorithm(core.FixedWindow).Named("route"))
	routeKey := func(r *http.Request) (string, error) {
		if rc := chi.RouteContext(r.Context()); rc != nil {
			if p := rc.RoutePattern(); p != "" {
				return p, nil
			}
		}
		return "", keyfuncs.ErrNoKey
	}
	r := chi.NewRouter()
	r.With(nethttp.New(lim, nethttp.WithKeyFunc(routeKey))).Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) {})
	want := []int{200, 200, 429}
	for i, path := range []string{"/users/1", "/users/2", "/users/3"} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want[i] {
			t.Errorf("GET %s = %d, want %d (one key per route pattern)", path, rec.Code, want[i])
		}
	}
}

func TestAdaptiveChi(t *testing.T) { guardtest.RunAdaptive(t, buildChi) }
