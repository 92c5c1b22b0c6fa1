package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
	"github.com/tollgate/tollgate/nethttp"
)

// An app-wide limit and a route's own limit, on one store and keyed by the
// same client IP: the route's denials must not use up the app-wide quota
// when the app-wide middleware refunds what did not pass.
func TestStackedMiddlewaresCountOnlyPassingRequests(t *testing.T) {
	store := memstore.New(memstore.WithSweepInterval(0))
	defer store.Close()
	app, err := core.New(store, core.PerMinute(5).Named("app"))
	if err != nil {
		t.Fatal(err)
	}
	search, err := core.New(store, core.PerMinute(10).Named("search"))
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("/search", nethttp.New(search, nethttp.WithCost(5))(ok))
	mux.Handle("/", ok)
	h := nethttp.New(app, nethttp.WithRefundOn(guard.NotPassed))(mux)

	var last *httptest.ResponseRecorder
	get := func(path string) int {
		t.Helper()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = "192.0.2.1:1234"
		h.ServeHTTP(rec, req)
		last = rec
		return rec.Code
	}
	for i, want := range []int{200, 200, 429, 429, 429} { // search: 10 per minute at cost 5
		if got := get("/search"); got != want {
			t.Fatalf("search #%d = %d, want %d", i+1, got, want)
		}
	}
	// The route's lists follow the app-wide middleware's: both policies show.
	if got, want := last.Header().Get("RateLimit-Policy"), `"app";q=5;w=60, "search";q=10;w=60`; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	if got := last.Header().Get("RateLimit"); !strings.HasPrefix(got, `"app";r=2;t=`) || !strings.Contains(got, `, "search";r=0;t=`) {
		t.Errorf("RateLimit = %q, want the app item (r=2: the denied searches were refunded) then the search item (r=0)", got)
	}
	// The app-wide limit counted the two searches that passed, not the three
	// the route denied: 3 of its 5 units are left.
	for i, want := range []int{200, 200, 200, 429} {
		if got := get("/"); got != want {
			t.Errorf("GET / #%d after the searches = %d, want %d", i+1, got, want)
		}
	}
}

// A per-user rule behind guard.Optional exempts anonymous requests whatever
// the typed key function returns for them: an empty key or ErrNoKey.
func TestOptionalRuleSkipsAnEmptyTypedKey(t *testing.T) {
	store := memstore.New(memstore.WithSweepInterval(0))
	defer store.Close()
	perIP, err := core.New(store, core.PerMinute(100))
	if err != nil {
		t.Fatal(err)
	}
	perUser, err := core.New(store, core.PerMinute(1), core.WithName("user"))
	if err != nil {
		t.Fatal(err)
	}
	user := nethttp.KeyFunc(func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil })
	h := nethttp.New(perIP, nethttp.WithRule(perUser, guard.Optional(user)))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i, tc := range []struct {
		user string
		want int
	}{{"", 200}, {"", 200}, {"ann", 200}, {"ann", 429}, {"", 200}} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		if tc.user != "" {
			req.Header.Set("X-User", tc.user)
		}
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("request %d (user %q) = %d, want %d", i+1, tc.user, rec.Code, tc.want)
		}
	}
}

// Every adapter answers a key longer than keyfuncs.MaxKeyLen from any key
// function the same way: 400, as for a missing key.
func TestOverlongKeysAreRejectedAlike(t *testing.T) {
	store := memstore.New(memstore.WithSweepInterval(0))
	defer store.Close()
	lim, err := core.New(store, core.PerMinute(10))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", keyfuncs.MaxKeyLen+1)
	h := nethttp.New(lim, nethttp.WithKeyFunc(func(*http.Request) (string, error) { return long, nil }))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusBadRequest || strings.Contains(rec.Body.String(), "kkkk") {
		t.Errorf("a %d-byte key: status %d body %q, want 400 without the key", len(long), rec.Code, rec.Body.String())
	}
}
