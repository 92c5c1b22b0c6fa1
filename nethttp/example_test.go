package nethttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/nethttp"
)

func Example() {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, err := core.New(store, core.WithClock(clock), core.PerMinute(2).WithAlgorithm(core.FixedWindow).Named("per-minute"))
	if err != nil {
		panic(err)
	}

	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	mux := http.NewServeMux()
	mux.Handle("GET /hello", hello)
	h := nethttp.New(lim)(mux) // whole app, keyed by client IP

	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/hello", nil))
		fmt.Println(strings.TrimSpace(fmt.Sprint(rec.Code, " ", rec.Header().Get("RateLimit"), " ", rec.Header().Get("Retry-After"))))
	}
	// Output:
	// 200 "per-minute";r=1;t=60
	// 200 "per-minute";r=0;t=60
	// 429 "per-minute";r=0;t=60 60
}

func ExampleNew_perRoute() {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	searchLim, _ := core.New(store, core.WithClock(clock), core.PerMinute(10).WithAlgorithm(core.FixedWindow).Named("search"))

	search := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "results") })
	mux := http.NewServeMux()
	mux.Handle("POST /search", nethttp.New(searchLim, nethttp.WithCost(5))(search)) // a costly endpoint

	for range 3 {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("POST", "/search", nil))
		fmt.Println(rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"))
	}
	// Output:
	// 200 "search";q=10;w=60 "search";r=5;t=60
	// 200 "search";q=10;w=60 "search";r=0;t=60
	// 429 "search";q=10;w=60 "search";r=0;t=60
}

// An app-wide middleware around the mux and a route's own act as one
// decision: the searches the route denies cost nothing app-wide, and every
// response lists both policies.
func ExampleNew_stacked() {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	appLim, _ := core.New(store, core.WithClock(clock), core.PerMinute(5).WithAlgorithm(core.FixedWindow).Named("app"))
	searchLim, _ := core.New(store, core.WithClock(clock), core.PerMinute(1).WithAlgorithm(core.FixedWindow).Named("search"))

	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("GET /search", nethttp.New(searchLim)(ok))
	mux.Handle("GET /", ok)
	h := nethttp.New(appLim)(mux)

	for _, path := range []string{"/search", "/search", "/search", "/"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Println(rec.Code, path, rec.Header().Get("RateLimit"))
	}
	// Output:
	// 200 /search "app";r=4;t=60, "search";r=0;t=60
	// 429 /search "app";r=4;t=60, "search";r=0;t=60
	// 429 /search "app";r=4;t=60, "search";r=0;t=60
	// 200 / "app";r=3;t=60
}
