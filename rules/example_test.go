package rules_test

import (
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/nethttp"
	"github.com/tollgate/tollgate/rules"
)

// A server configured from a rules file. (Parse reads a file's content;
// Open reads the file, and can Reload it.)
func Example() {
	cfg, err := rules.Parse("rules.yaml", []byte(`
limiters:
  per-ip: {limits: "10/s, 100/m"}
  search: {limits: 20/m name search}
routes:
  - {match: /, limiters: per-ip}
  - {match: POST /search, limiters: [per-ip, search], cost: 5}
`))
	if err != nil {
		log.Fatal(err) // e.g. rules.yaml:3: limiters.per-ip.limits: quota 0 must be at least 1
	}
	clock := core.ClockFunc(func() time.Time { return time.Unix(1_700_006_400, 0) }) // fixed, for the example
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	set, err := rules.New(store, cfg, rules.WithClock(clock), rules.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	defer set.Close()

	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := set.Middleware(app)
	for _, req := range []struct{ method, path string }{{"GET", "/"}, {"POST", "/search"}, {"POST", "/search"}} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(req.method, req.path, nil)
		h.ServeHTTP(w, r)
		fmt.Println(req.method, req.path, w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// GET / 200 "10-per-1s";r=9;t=2
	// POST /search 200 "10-per-1s";r=4;t=2, "search";r=15;t=63
	// POST /search 429 "10-per-1s";r=4;t=2
}

// A route handed to another adapter: here nethttp's, as gin's, echo's or
// fiber's would take it.
func ExampleSet_Options() {
	cfg, err := rules.Parse("rules.yaml", []byte(`
keys:
  apikey: {header: X-API-Key}
limiters:
  api: {key: apikey, limits: 2/m}
routes:
  - {match: /api/, name: api, limiters: api}
`))
	if err != nil {
		log.Fatal(err)
	}
	clock := core.ClockFunc(func() time.Time { return time.Unix(1_700_006_400, 0) })
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	set, err := rules.New(store, cfg, rules.WithClock(clock), rules.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	lim, opts, err := set.Options("api")
	if err != nil {
		log.Fatal(err)
	}
	h := nethttp.New(lim, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 3 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/items", nil)
		r.Header.Set("X-API-Key", "k1")
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 "2-per-1m";r=1;t=90
	// 200 "2-per-1m";r=0;t=90
	// 429 "2-per-1m";r=0;t=90
}
