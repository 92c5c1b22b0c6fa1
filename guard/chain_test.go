package guard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// chainRecorder is a recorder that carries a Chain, as adapters' writers
// do: Guards serving one request through it act as one decision.
type chainRecorder struct {
	*recorder
	chain guard.Chain
}

func (w *chainRecorder) Chain() *guard.Chain { return &w.chain }

// stack serves req through gs, the first outermost, all on one chain, and
// reports the response and whether the handler ran.
func stack(t *testing.T, req *http.Request, gs ...*guard.Guard) (*chainRecorder, bool) {
	t.Helper()
	w := &chainRecorder{recorder: newRecorder()}
	ran := false
	var serve func(i int) guard.Result
	serve = func(i int) guard.Result {
		if i == len(gs) {
			ran = true
			w.status = 200
			return guard.Result{Status: 200}
		}
		if err := gs[i].Serve(keyfuncs.FromHTTP(req), w, func(context.Context) guard.Result { return serve(i + 1) }); err != nil {
			t.Fatalf("Serve: %v", err)
		}
		return guard.Result{Status: w.status}
	}
	serve(0)
	return w, ran
}

func TestFindChain(t *testing.T) {
	w := &chainRecorder{recorder: newRecorder()}
	carrier := &carrierWriter{ResponseRecorder: httptest.NewRecorder(), chain: &w.chain}
	deep := http.ResponseWriter(carrier)
	for range 15 {
		deep = unwrapper{deep}
	}
	tests := []struct {
		name string
		w    http.ResponseWriter
		want *guard.Chain
	}{
		{"a writer that carries a chain is found", carrier, &w.chain},
		{"a chain 15 writers down is found through Unwrap", deep, &w.chain},
		{"a chain 16 writers down is not looked for", unwrapper{deep}, nil},
		{"a writer without a chain has none", httptest.NewRecorder(), nil},
		{"a nil writer has none", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := guard.FindChain(tt.w); got != tt.want {
				t.Errorf("FindChain = %p, want %p", got, tt.want)
			}
		})
	}
}

type carrierWriter struct {
	*httptest.ResponseRecorder
	chain *guard.Chain
}

func (w *carrierWriter) Chain() *guard.Chain { return w.chain }

type unwrapper struct{ http.ResponseWriter }

func (u unwrapper) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// Two middlewares on one chain: the inner one's denial leaves no charge in
// the outer one, whose item on the 429 shows the state after the refund.
func TestAnInnerDenialRefundsTheOuterMiddleware(t *testing.T) {
	e := newEnv(t)
	app, search := e.limiter(t, fixed(5, time.Minute, "app")), e.limiter(t, fixed(1, time.Minute, "search"))
	outer, inner := mustNew(t, app), mustNew(t, search)
	for i, want := range []struct {
		status    int
		rateLimit string
	}{
		{200, `"app";r=4;t=60, "search";r=0;t=60`},
		{429, `"app";r=4;t=60, "search";r=0;t=60`},
		{429, `"app";r=4;t=60, "search";r=0;t=60`},
	} {
		w, _ := stack(t, request("192.0.2.1:1"), outer, inner)
		if w.status != want.status || w.header.Get(guard.HeaderRateLimit) != want.rateLimit {
			t.Errorf("request %d: %d %q, want %d %q", i, w.status, w.header.Get(guard.HeaderRateLimit), want.status, want.rateLimit)
		}
	}
	if got := remaining(t, app, "192.0.2.1"); got != 4 {
		t.Errorf("app remaining = %d, want 4: only the request that passed counts", got)
	}
}

// The same Limiter in two middlewares, or in two rules of one, charges a
// request once; a larger cost further in charges only what it adds.
func TestOneStateIsChargedOncePerRequest(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, fixed(10, time.Minute, "m"))
	twice := mustNew(t, lim, guard.WithRule(lim, keyfuncs.IP()))
	costly := mustNew(t, lim, guard.WithCost(4))
	w, _ := stack(t, request("192.0.2.1:1"), twice, twice)
	if got := remaining(t, lim, "192.0.2.1"); got != 9 || w.header.Get(guard.HeaderRateLimitPolicy) != `"m";q=10;w=60` {
		t.Errorf("one Limiter four times: remaining %d, policy %q; want 9 and one policy", got, w.header.Get(guard.HeaderRateLimitPolicy))
	}
	stack(t, request("192.0.2.1:1"), twice, costly)
	if got := remaining(t, lim, "192.0.2.1"); got != 5 {
		t.Errorf("costs 1 then 4 on one state: remaining %d, want 5 (the largest, once)", got)
	}
	stack(t, request("192.0.2.1:1"), costly, twice)
	if got := remaining(t, lim, "192.0.2.1"); got != 1 {
		t.Errorf("costs 4 then 1 on one state: remaining %d, want 1 (the largest, once)", got)
	}
}

// Limiters configured alike share state when their store is the same
// comparable value; a store value that cannot be compared is never taken
// for the same, and never panics: neither one of an uncomparable type, nor
// one of a comparable type holding an uncomparable value (== compares the
// interface field, and panics).
func TestAlikeLimitersOnIncomparableStores(t *testing.T) {
	d := core.Decision{Allowed: true, Limit: fixed(5, time.Minute, "m"), Remaining: 4, States: []core.LimitState{}}
	clock := newEnv(t).clock
	for name, store := range map[string]func() core.Store{
		"an uncomparable type":                     func() core.Store { return stubStore{d} }, // holds a slice
		"a comparable type, an uncomparable value": func() core.Store { return wrappedStore{stubStore{d}} },
	} {
		a := limiterOn(t, store(), clock, d.Limit)
		b := limiterOn(t, store(), clock, d.Limit)
		w, ran := stack(t, request("192.0.2.1:1"), mustNew(t, a), mustNew(t, b))
		if !ran || w.header.Get(guard.HeaderRateLimitPolicy) != `"m";q=5;w=60, "m-2";q=5;w=60` {
			t.Errorf("%s: ran %v, RateLimit-Policy %q; want two states, told apart", name, ran, w.header.Get(guard.HeaderRateLimitPolicy))
		}
	}
}

// wrappedStore is a comparable struct type whose field may hold a store
// value == cannot compare.
type wrappedStore struct{ core.Store }

// Names that collide get the first free suffix, cut to stay within
// core.MaxNameLen.
func TestPolicyNamesAreUniqueInAResponse(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("n", core.MaxNameLen)
	tests := []struct {
		name   string
		limits [][]core.Limit // one limiter (one middleware) each
		want   string
	}{
		{"a repeated name gets -2, then -3", [][]core.Limit{{fixed(1, time.Minute, "a")}, {fixed(2, time.Minute, "a")}, {fixed(3, time.Minute, "a")}},
			`"a";q=1;w=60, "a-2";q=2;w=60, "a-3";q=3;w=60`},
		{"a suffix already taken is skipped", [][]core.Limit{{fixed(1, time.Minute, "a")}, {fixed(2, time.Minute, "a-2")}, {fixed(3, time.Minute, "a")}},
			`"a";q=1;w=60, "a-2";q=2;w=60, "a-3";q=3;w=60`},
		{"a name of the longest length is cut for its suffix", [][]core.Limit{{fixed(1, time.Minute, long)}, {fixed(2, time.Minute, long)}},
			`"` + long + `";q=1;w=60, "` + long[:core.MaxNameLen-2] + `-2";q=2;w=60`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gs []*guard.Guard
			for _, ls := range tt.limits {
				gs = append(gs, mustNew(t, e.limiter(t, ls...)))
			}
			w, _ := stack(t, request(fmt.Sprintf("192.0.2.%d:1", len(tt.name))), gs...)
			if got := w.header.Get(guard.HeaderRateLimitPolicy); got != tt.want {
				t.Errorf("RateLimit-Policy = %q, want %q", got, tt.want)
			}
		})
	}
}

// A Guard remembers the policies of the middlewares inside it for at most
// 1024 routes: a route seen later is answered with its own policies only.
func TestRouteMemoryIsBounded(t *testing.T) {
	e := newEnv(t)
	app := e.limiter(t, fixed(2000, time.Minute, "app"))
	outer := mustNew(t, app, guard.WithKey(keyfuncs.Static("all")))
	inner := mustNew(t, e.limiter(t, fixed(2000, time.Minute, "route")), guard.WithKey(keyfuncs.Static("all")))
	route := func(i int) *http.Request {
		r := request("192.0.2.1:1")
		r.Pattern = fmt.Sprintf("GET /r%d", i)
		return r
	}
	for i := range 1025 { // requests that pass teach outer the inner policies
		if _, ran := stack(t, route(i), outer, inner); !ran {
			t.Fatalf("route %d: denied", i)
		}
	}
	if d, err := app.AllowN(context.Background(), "all", 2000-1025); err != nil || !d.Allowed {
		t.Fatalf("exhausting app: %v, %v", d.Allowed, err)
	}
	const both, own = `"app";q=2000;w=60, "route";q=2000;w=60`, `"app";q=2000;w=60`
	for _, tt := range []struct {
		i    int
		want string
	}{{0, both}, {1023, both}, {1024, own}} {
		w, ran := stack(t, route(tt.i), outer, inner)
		if ran || w.header.Get(guard.HeaderRateLimitPolicy) != tt.want {
			t.Errorf("route %d: ran %v, RateLimit-Policy %q; want a denial listing %q", tt.i, ran, w.header.Get(guard.HeaderRateLimitPolicy), tt.want)
		}
	}
}

// Of two middlewares that settle one state after the handler, the
// innermost settles it; the outer one leaves it.
func TestTheInnermostSettlesASharedState(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, fixed(10, time.Minute, "m"))
	outer := mustNew(t, lim, guard.WithRefundOn(func(int) bool { return true }))
	inner := mustNew(t, lim, guard.WithResponseCost(func(guard.Result) int64 { return 3 }))
	stack(t, request("192.0.2.1:1"), outer, inner)
	if got := remaining(t, lim, "192.0.2.1"); got != 7 {
		t.Errorf("remaining = %d, want 7: settled once, at the inner middleware's cost", got)
	}
}

// A rule whose store fails adds nothing to the chain: an inner middleware
// in dry run that fails on its store lets the request through, and the
// outer middleware, which remembers the policies listed inside it on the
// route, lists on its 429s only those of decisions that were made.
func TestAFailedDecisionLeavesNoEntry(t *testing.T) {
	e := newEnv(t)
	app := e.limiter(t, fixed(1, time.Minute, "app"))
	broken := limiterOn(t, guardtest.FailingStore{}, e.clock, fixed(5, time.Minute, "broken"))
	outer, inner := mustNew(t, app), mustNew(t, broken, guard.WithDryRun(true))
	req := func() *http.Request {
		r := request("192.0.2.1:1")
		r.Pattern = "GET /search"
		return r
	}
	if _, ran := stack(t, req(), outer, inner); !ran {
		t.Fatal("first request: the handler did not run; want it through")
	}
	w, _ := stack(t, req(), outer, inner)
	if w.status != 429 || w.header.Get(guard.HeaderRateLimitPolicy) != `"app";q=1;w=60` {
		t.Errorf("second request: %d, RateLimit-Policy %q; want 429 and only app's policy", w.status, w.header.Get(guard.HeaderRateLimitPolicy))
	}
}

// A Chain that keeps its state (as a pooling adapter's writer does) has
// it back, free, after a request whose way out panicked twice: a key
// function panics, the refund of what the request took fails, and the
// OnError hook told of that failure panics in turn. The next requests are
// limited as if nothing had happened, but for the unit the failed refund
// left charged.
func TestAPanicOnTheWayOutLeavesAKeptStateFree(t *testing.T) {
	e := newEnv(t)
	lim := limiterOn(t, refundFailingStore{e.store}, e.clock, fixed(3, time.Minute, "a"))
	other := e.limiter(t, fixed(100, time.Minute, "b"))
	first := true
	g := mustNew(t, lim,
		guard.WithRule(other, func(keyfuncs.Request) (string, error) {
			if first {
				first = false
				panic(guardtest.Boom)
			}
			return "k", nil
		}),
		guard.WithOnError(func(keyfuncs.Request, error) { panic("hook") }),
	)
	w := &chainRecorder{}
	w.chain.Keep()
	serve := func() *chainRecorder {
		w.recorder = newRecorder()
		if err := g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), w, func(context.Context) guard.Result {
			w.status = 200
			return guard.Result{Status: 200}
		}); err != nil {
			t.Fatalf("Serve: %v", err)
		}
		return w
	}
	func() {
		defer func() {
			if got := recover(); got != "hook" {
				t.Fatalf("the first request recovered %v, want the hook's panic", got)
			}
		}()
		serve()
	}()
	for i, want := range []struct {
		status    int
		rateLimit string
	}{
		{200, `"a";r=1;t=60, "b";r=99;t=60`},
		{200, `"a";r=0;t=60, "b";r=98;t=60`},
		{429, `"a";r=0;t=60`},
	} {
		w := serve()
		if w.status != want.status || w.header.Get(guard.HeaderRateLimit) != want.rateLimit {
			t.Errorf("request %d after the panic: %d %q, want %d %q", i+2, w.status, w.header.Get(guard.HeaderRateLimit), want.status, want.rateLimit)
		}
	}
}
