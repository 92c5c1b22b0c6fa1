package nethttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
	"github.com/tollgate/tollgate/nethttp"
)

// An app-wide limit and a route's own limit, keyed by the same client IP
// (the README's pattern): the route's denials never use up the app-wide
// quota, by default, and with WithRefundOn(guard.NotPassed) as before.
func TestStackedMiddlewaresCountOnlyPassingRequests(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []nethttp.Option
	}{
		{"by default", nil},
		{"with WithRefundOn(guard.NotPassed)", []nethttp.Option{nethttp.WithRefundOn(guard.NotPassed)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			app := newLimiter(t, nil, fixed(5, "app"))
			search := newLimiter(t, nil, fixed(10, "search"))
			ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
			mux := http.NewServeMux()
			mux.Handle("/search", nethttp.New(search, nethttp.WithCost(5))(ok))
			mux.Handle("/", ok)
			h := nethttp.New(app, tt.opts...)(mux)

			var last *httptest.ResponseRecorder
			for i, want := range []int{200, 200, 429, 429, 429} { // search: 10 per minute at cost 5
				if last = do(h, httptest.NewRequest("GET", "/search", nil)); last.Code != want {
					t.Fatalf("search #%d = %d, want %d", i+1, last.Code, want)
				}
			}
			if got, want := last.Header().Get("RateLimit-Policy"), `"app";q=5;w=60, "search";q=10;w=60`; got != want {
				t.Errorf("RateLimit-Policy = %q, want %q", got, want)
			}
			// The 429 shows the app-wide state after its refund: the two
			// searches that passed, not the three denied.
			if got, want := last.Header().Get("RateLimit"), `"app";r=3;t=60, "search";r=0;t=60`; got != want {
				t.Errorf("RateLimit = %q, want %q", got, want)
			}
			if got := remainingOf(t, app, "192.0.2.1"); got != 3 {
				t.Errorf("app-wide remaining after the searches = %d, want 3", got)
			}
			for i, want := range []int{200, 200, 200, 429} {
				if got := do(h, httptest.NewRequest("GET", "/", nil)).Code; got != want {
					t.Errorf("GET / #%d after the searches = %d, want %d", i+1, got, want)
				}
			}
		})
	}
}

// remainingOf peeks at key's remaining units under lim.
func remainingOf(t *testing.T, lim *core.Limiter, key string) int64 {
	t.Helper()
	d, err := lim.Peek(context.Background(), key)
	if err != nil {
		t.Fatalf("Peek(%q): %v", key, err)
	}
	return d.Remaining
}

// A middleware inside the mux knows the route's pattern: when it denies a
// request before the route's own middleware runs, its 429 lists the
// route's policies as the responses that passed did.
func TestAnOuterDenialListsTheRoutesPolicies(t *testing.T) {
	app := nethttp.New(newLimiter(t, nil, fixed(3, "app")))
	search := nethttp.New(newLimiter(t, nil, fixed(10, "search")))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("GET /search", app(search(ok)))
	mux.Handle("GET /hello", app(ok))
	const both = `"app";q=3;w=60, "search";q=10;w=60`
	for i, s := range []struct {
		path         string
		status       int
		policy, rate string
	}{
		{"/search", 200, both, `"app";r=2;t=60, "search";r=9;t=60`},
		{"/hello", 200, `"app";q=3;w=60`, `"app";r=1;t=60`},
		{"/hello", 200, `"app";q=3;w=60`, `"app";r=0;t=60`},
		{"/search", 429, both, `"app";r=0;t=60`}, // search did not run: its policy is the one learned on the route
		{"/hello", 429, `"app";q=3;w=60`, `"app";r=0;t=60`},
	} {
		rec := do(mux, httptest.NewRequest("GET", s.path, nil))
		if rec.Code != s.status || rec.Header().Get("RateLimit-Policy") != s.policy || rec.Header().Get("RateLimit") != s.rate {
			t.Errorf("step %d GET %s: %d %q %q, want %d %q %q", i, s.path, rec.Code,
				rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"), s.status, s.policy, s.rate)
		}
	}
}

// A route whose inner middleware stops listing its policy (here it skips
// the request) is remembered with none: the outer middleware's next 429 on
// the route lists only its own.
func TestARouteForgetsAnInnerPolicyNoLongerListed(t *testing.T) {
	app := nethttp.New(newLimiter(t, nil, fixed(3, "app")))
	search := nethttp.New(newLimiter(t, nil, fixed(10, "search")),
		nethttp.WithSkip(func(r *http.Request) bool { return r.Header.Get("X-Skip") != "" }))
	mux := http.NewServeMux()
	mux.Handle("GET /search", app(search(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))))
	for i, s := range []struct {
		skip   bool
		status int
		policy string
	}{
		{false, 200, `"app";q=3;w=60, "search";q=10;w=60`},
		{true, 200, `"app";q=3;w=60`},
		{true, 200, `"app";q=3;w=60`},
		{false, 429, `"app";q=3;w=60`}, // search was skipped last: the route lists none of it
	} {
		req := httptest.NewRequest("GET", "/search", nil)
		if s.skip {
			req.Header.Set("X-Skip", "1")
		}
		rec := do(mux, req)
		if rec.Code != s.status || rec.Header().Get("RateLimit-Policy") != s.policy {
			t.Errorf("step %d: %d %q, want %d %q", i, rec.Code, rec.Header().Get("RateLimit-Policy"), s.status, s.policy)
		}
	}
}

// A middleware further in that cannot decide (its store fails) stops the
// request: the app-wide one gives its unit back, and the headers it set
// are brought up to date.
func TestAnInnerFailureRefundsTheOuterMiddlewares(t *testing.T) {
	app := newLimiter(t, nil, fixed(5, "app"))
	broken := newLimiter(t, guardtest.FailingStore{}, fixed(5, "broken"))
	h := nethttp.New(app)(nethttp.New(broken)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the handler ran")
	})))
	rec := do(h, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 503 || rec.Header().Get("RateLimit") != `"app";r=5;t=60` {
		t.Errorf("status %d, RateLimit %q; want 503 and the app-wide limit untouched", rec.Code, rec.Header().Get("RateLimit"))
	}
	if got := remainingOf(t, app, "192.0.2.1"); got != 5 {
		t.Errorf("app-wide remaining = %d, want 5", got)
	}
}

// A panic in a function of a middleware further in leaves no charge in the
// middlewares around it either.
func TestAPanicFurtherInLeavesNoCharge(t *testing.T) {
	app := newLimiter(t, nil, fixed(5, "app"))
	inner := newLimiter(t, nil, fixed(5, "inner"))
	h := nethttp.New(app)(nethttp.New(inner, nethttp.WithKeyFunc(func(*http.Request) (string, error) { panic(guardtest.Boom) }))(http.NotFoundHandler()))
	func() {
		defer func() {
			if r := recover(); r != guardtest.Boom {
				t.Errorf("recovered %v, want %v", r, guardtest.Boom)
			}
		}()
		do(h, httptest.NewRequest("GET", "/", nil))
	}()
	if got := remainingOf(t, app, "192.0.2.1"); got != 5 {
		t.Errorf("app-wide remaining after the panic = %d, want 5", got)
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

// Stacked middlewares serving many clients at once, on writers and chain
// states that go back to their pools and serve the next requests (a
// writer's Chain keeps its state): every response lists its own client's
// two states, once each, and every client is charged exactly its own
// requests on both limits.
func TestPooledChainsKeepRequestsApart(t *testing.T) {
	app, search := newLimiter(t, nil, fixed(1000, "app")), newLimiter(t, nil, fixed(1000, "search"))
	h := nethttp.New(app)(nethttp.New(search)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	const clients, each = 8, 50
	var wg sync.WaitGroup
	errs := make(chan string, clients*each)
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.RemoteAddr = fmt.Sprintf("192.0.2.%d:1", c+1)
				rec := do(h, r)
				left := 1000 - i - 1
				want := fmt.Sprintf(`"app";r=%d;t=60, "search";r=%d;t=60`, left, left)
				if got := rec.Header().Get(guard.HeaderRateLimit); rec.Code != http.StatusOK || got != want {
					errs <- fmt.Sprintf("client %d, request %d: %d %q, want 200 %q", c+1, i, rec.Code, got, want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for c := range clients {
		key := fmt.Sprintf("192.0.2.%d", c+1)
		if a, s := remainingOf(t, app, key), remainingOf(t, search, key); a != 1000-each || s != 1000-each {
			t.Errorf("client %s: remaining app %d, search %d; want %d each", key, a, s, 1000-each)
		}
	}
}
