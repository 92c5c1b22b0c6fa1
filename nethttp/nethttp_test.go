package nethttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
	"github.com/tollgate/tollgate/nethttp"
)

var newLimiter = guardtest.NewLimiter

func fixed(n int64, name string) core.Limit {
	return core.PerMinute(n).WithAlgorithm(core.FixedWindow).Named(name)
}

func do(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestNewPanicsOnProgrammerErrors(t *testing.T) {
	lim := newLimiter(t, nil, fixed(1, "m"))
	for name, f := range map[string]func(){
		"nil limiter":          func() { nethttp.New(nil) },
		"negative cost":        func() { nethttp.New(lim, nethttp.WithCost(-1)) },
		"negative max delay":   func() { nethttp.New(lim, nethttp.WithMaxDelay(-time.Second)) },
		"nil limiter in rule":  func() { nethttp.New(lim, nethttp.WithRule(nil, keyfuncs.IP())) },
		"unknown header style": func() { nethttp.New(lim, nethttp.WithHeaders(guard.HeaderStyle(200))) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("New with a %s did not panic", name)
				}
			}()
			f()
		})
	}
}

func TestNilFunctionsPanicAtConstruction(t *testing.T) {
	lim := newLimiter(t, nil, fixed(1, "m"))
	tests := []struct {
		option string
		opt    nethttp.Option
	}{
		{"WithKeyFunc", nethttp.WithKeyFunc(nil)},
		{"WithKey", nethttp.WithKey(nil)},
		{"WithRule", nethttp.WithRule(lim, nil)},
		{"WithRule", nethttp.WithRule(lim, nethttp.KeyFunc(nil))},
		{"WithCostFunc", nethttp.WithCostFunc(nil)},
		{"WithSkip", nethttp.WithSkip(nil)},
		{"WithDeniedHandler", nethttp.WithDeniedHandler(nil)},
		{"WithErrorHandler", nethttp.WithErrorHandler(nil)},
		{"WithRefundOn", nethttp.WithRefundOn(nil)},
		{"WithResponseCost", nethttp.WithResponseCost(nil)},
		{"WithOnDenied", nethttp.WithOnDenied(nil)},
		{"WithOnError", nethttp.WithOnError(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.option+" of nil panics in New, naming it", func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "nethttp: New: ") || !strings.Contains(s, ": "+tt.option+": nil ") {
					t.Errorf("New(lim, %s(nil)) recovered %v, want a nethttp panic naming %s", tt.option, r, tt.option)
				}
			}()
			nethttp.New(lim, tt.opt)
		})
	}
}

func TestTheDefaultKeyIsThePeerAddress(t *testing.T) {
	h := nethttp.New(newLimiter(t, nil, fixed(1, "m")))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i, tt := range []struct {
		peer string
		want int
	}{{"192.0.2.1:1234", 200}, {"192.0.2.1:5678", 429}, {"192.0.2.2:1234", 200}} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.peer
		if got := do(h, r).Code; got != tt.want {
			t.Errorf("request %d from %s = %d, want %d", i, tt.peer, got, tt.want)
		}
	}
}

func TestRoutePatternFromTheStandardMux(t *testing.T) {
	lim := newLimiter(t, nil, fixed(2, "per-route"))
	mw := nethttp.New(lim, nethttp.WithKey(keyfuncs.Route()))
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	want := []int{200, 200, 429}
	for i, path := range []string{"/items/1", "/items/2", "/items/3"} {
		if got := do(mux, httptest.NewRequest("GET", path, nil)).Code; got != want[i] {
			t.Errorf("GET %s = %d, want %d (one key per route pattern)", path, got, want[i])
		}
	}
}

func TestNativeOptions(t *testing.T) {
	lim := newLimiter(t, nil, fixed(3, "m"))
	var denied, errored int
	h := nethttp.New(lim,
		nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
			if u := r.URL.Query().Get("user"); u != "" {
				return u, nil
			}
			return "", errors.New("no user")
		}),
		nethttp.WithCostFunc(func(r *http.Request) (int64, error) { return int64(len(r.URL.Query()["x"])), nil }),
		nethttp.WithSkip(func(r *http.Request) bool { return r.Method == http.MethodOptions }),
		nethttp.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d *guard.Denial) {
			w.WriteHeader(http.StatusTeapot)
			fmt.Fprintf(w, "denied %s", r.URL.Query().Get("user"))
		}),
		nethttp.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusUnauthorized)
		}),
		nethttp.WithOnDenied(func(r *http.Request, d *guard.Denial) { denied++ }),
		nethttp.WithOnError(func(r *http.Request, err error) { errored++ }),
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	tests := []struct {
		method, target string
		want           int
		body           string
	}{
		{"GET", "/?user=a&x&x", 200, ""},
		{"GET", "/?user=a&x&x", 418, "denied a"},
		{"GET", "/", 401, ""},
		{"OPTIONS", "/", 200, ""},
		{"GET", "/?user=a&x", 200, ""},
	}
	for i, tt := range tests {
		rec := do(h, httptest.NewRequest(tt.method, tt.target, nil))
		if rec.Code != tt.want || rec.Body.String() != tt.body {
			t.Errorf("request %d %s %s = %d %q, want %d %q", i, tt.method, tt.target, rec.Code, rec.Body, tt.want, tt.body)
		}
	}
	if denied != 1 || errored != 1 {
		t.Errorf("hooks: %d denials, %d errors; want 1 and 1", denied, errored)
	}
	if got := rec429Headers(t, h); got == "" {
		t.Error("the native denied handler's response lacks RateLimit")
	}
}

func rec429Headers(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := do(h, httptest.NewRequest("GET", "/?user=a&x&x", nil))
	return rec.Header().Get("RateLimit")
}

func TestHangingStoreEndsWithTheRequest(t *testing.T) {
	lim := newLimiter(t, guardtest.HangingStore{}, fixed(1, "m"))
	h := nethttp.New(lim)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("handler ran") }))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	rec := do(h, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
	if rec.Code != 503 || strings.Contains(rec.Body.String(), "deadline") {
		t.Errorf("hanging store: %d %s; want 503 with a generic body", rec.Code, rec.Body)
	}
}

func TestLeakyBucketWaitIsCancelledWithTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, nil, core.Per(1, time.Second).WithAlgorithm(core.LeakyBucket).WithBurst(10).Named("leaky"))
		h := nethttp.New(lim, nethttp.WithMaxDelay(time.Minute))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		do(h, httptest.NewRequest("GET", "/", nil)) // the next one waits 1s
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(300 * time.Millisecond)
			cancel()
		}()
		start := time.Now()
		rec := do(h, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
		if rec.Code != 503 || time.Since(start) != 300*time.Millisecond {
			t.Errorf("cancelled wait: %d after %v; want 503 after 300ms", rec.Code, time.Since(start))
		}
		start = time.Now()
		if rec := do(h, httptest.NewRequest("GET", "/", nil)); rec.Code != 200 || time.Since(start) != time.Second {
			t.Errorf("next request: %d after %v; want 200 after 1s (the cancelled one's turn, the last in the queue, given back)", rec.Code, time.Since(start))
		}
	})
}

func TestReportedCostThroughTheRequestContext(t *testing.T) {
	lim := newLimiter(t, nil, fixed(100, "m"))
	h := nethttp.New(lim, nethttp.WithReportedCost())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !guard.ReportCost(r.Context(), 40) {
			t.Error("ReportCost found no slot in the handler's context")
		}
	}))
	do(h, httptest.NewRequest("GET", "/", nil))
	if rec := do(h, httptest.NewRequest("GET", "/", nil)); rec.Header().Get("RateLimit") != `"m";r=59;t=60` {
		t.Errorf("RateLimit = %q, want r=59 (100 − 40 − 1)", rec.Header().Get("RateLimit"))
	}
}

// A request may carry a context of a type == cannot compare (a struct
// value with a slice field): the middleware passes it on, and does not
// panic comparing it with the context it hands the handler.
func TestAnUncomparableRequestContextPassesThrough(t *testing.T) {
	for _, reported := range []bool{false, true} {
		var opts []nethttp.Option
		if reported {
			opts = append(opts, nethttp.WithReportedCost())
		}
		h := nethttp.New(newLimiter(t, nil, fixed(100, "m")), opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Context().Value(guardtest.UncomparableKey{}) != "seen" {
				t.Error("the handler's context lost the request's")
			}
			if reported && !guard.ReportCost(r.Context(), 10) {
				t.Error("ReportCost found no slot in the handler's context")
			}
		}))
		r := httptest.NewRequest("GET", "/", nil)
		r = r.WithContext(guardtest.UncomparableContext(r.Context()))
		rec := do(h, r)
		if got := rec.Header().Get("RateLimit"); rec.Code != http.StatusOK || got != `"m";r=99;t=60` {
			t.Errorf("reported cost %v: status %d, RateLimit %q; want 200, r=99", reported, rec.Code, got)
		}
	}
}

// The handler's writer carries the request's chain to the middlewares
// further in, and unwraps to the original writer, for
// http.ResponseController. (It used to be the original writer itself when
// nothing settled; now it always carries the chain.)
func TestHandlerWriterCarriesTheChainAndUnwrapsToTheOriginal(t *testing.T) {
	lim := newLimiter(t, nil, fixed(100, "m"))
	rec := httptest.NewRecorder()
	ran := false
	// The writer is checked while the handler runs: it may not be used
	// after the handler returns (and is reused then).
	h := nethttp.New(lim)(http.HandlerFunc(func(got http.ResponseWriter, r *http.Request) {
		ran = true
		u, ok := got.(interface{ Unwrap() http.ResponseWriter })
		if !ok || u.Unwrap() != http.ResponseWriter(rec) {
			t.Errorf("handler got %T, want a writer that unwraps to the original", got)
		}
		if guard.FindChain(got) == nil {
			t.Error("guard.FindChain found no chain in the handler's writer")
		}
	}))
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if !ran {
		t.Fatal("the handler did not run")
	}
}

// TestWrappedWriterKeepsItsCapabilities runs a real server so that the
// writer can flush, hijack and sendfile.
func TestWrappedWriterKeepsItsCapabilities(t *testing.T) {
	lim := newLimiter(t, nil, fixed(100, "m"))
	results := make(chan guard.Result, 1) // the settle of a hijacked request may follow the client's read
	mw := nethttp.New(lim, nethttp.WithResponseCost(func(r guard.Result) int64 { results <- r; return 1 }))
	mux := http.NewServeMux()
	mux.HandleFunc("/flush", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("wrapped writer is not an http.Flusher")
		}
		w.WriteHeader(http.StatusEarlyHints) // informational: not the status
		io.WriteString(w, "a")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("ResponseController.Flush: %v", err)
		}
		io.WriteString(w, "bc")
	})
	mux.HandleFunc("/copy", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(io.ReaderFrom); !ok {
			t.Error("wrapped writer is not an io.ReaderFrom")
		}
		w.WriteHeader(http.StatusAccepted)
		io.Copy(w, strings.NewReader("hello"))
	})
	mux.HandleFunc("/hijack", func(w http.ResponseWriter, r *http.Request) {
		hj, ok := w.(http.Hijacker)
		if !ok {
			t.Error("wrapped writer over HTTP/1 is not an http.Hijacker")
			return
		}
		conn, buf, err := hj.Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 299 Hijacked\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		buf.Flush()
	})
	mux.HandleFunc("/deadline", func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through Unwrap: %v", err)
		}
	})
	srv := httptest.NewServer(mw(mux))
	defer srv.Close()
	tests := []struct {
		path string
		want guard.Result
	}{
		{"/flush", guard.Result{Status: 200, Bytes: 3}},
		{"/copy", guard.Result{Status: 202, Bytes: 5}},
		{"/hijack", guard.Result{Status: 101}},
		{"/deadline", guard.Result{Status: 200}},
	}
	for _, tt := range tests {
		resp, err := srv.Client().Get(srv.URL + tt.path)
		if err != nil {
			t.Fatalf("GET %s: %v", tt.path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := <-results; got != tt.want {
			t.Errorf("GET %s: settled with %+v, want %+v", tt.path, got, tt.want)
		}
	}
}

func TestWrapperClaimsNoHijackerItCannotBack(t *testing.T) {
	// A writer without Hijack support must not claim it.
	lim := newLimiter(t, nil, fixed(100, "m"))
	h := nethttp.New(lim, nethttp.WithRefundOn(guard.ServerErrors))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Hijacker); ok {
			t.Error("wrapper over a recorder claims http.Hijacker")
		}
		if _, _, err := http.NewResponseController(w).Hijack(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("Hijack through the controller = %v, want ErrNotSupported", err)
		}
	}))
	do(h, httptest.NewRequest("GET", "/", nil))
}

func TestPanicRefundsAndPropagates(t *testing.T) {
	lim := newLimiter(t, nil, fixed(1, "m"))
	h := nethttp.New(lim, nethttp.WithRefundOn(guard.ServerErrors))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
	}))
	func() {
		defer func() {
			if recover() != http.ErrAbortHandler {
				t.Error("panic did not propagate")
			}
		}()
		do(h, httptest.NewRequest("GET", "/panic", nil))
	}()
	if rec := do(h, httptest.NewRequest("GET", "/", nil)); rec.Code != 200 {
		t.Errorf("after a panicking request: %d, want 200 (refunded)", rec.Code)
	}
}

func TestPanicsInConfiguredFunctionsLeaveNoCharge(t *testing.T) {
	const boom = guardtest.Boom
	when := func(r *http.Request, trigger string) bool { return r.Header.Get(guardtest.TriggerHeader) == trigger }
	tests := []struct {
		name, trigger string
		opts          []nethttp.Option
	}{
		{"a later rule's key function", "panic", nil},
		{"the cost function", "panic", []nethttp.Option{nethttp.WithCostFunc(func(r *http.Request) (int64, error) {
			if when(r, "panic") {
				panic(boom)
			}
			return 1, nil
		})}},
		{"the skip function", "panic", []nethttp.Option{nethttp.WithSkip(func(r *http.Request) bool {
			if when(r, "panic") {
				panic(boom)
			}
			return false
		})}},
		{"the denied handler", "deny", []nethttp.Option{nethttp.WithDeniedHandler(func(http.ResponseWriter, *http.Request, *guard.Denial) { panic(boom) })}},
		{"the OnDenied hook", "deny", []nethttp.Option{nethttp.WithOnDenied(func(*http.Request, *guard.Denial) { panic(boom) })}},
		{"the error handler", "fail", []nethttp.Option{nethttp.WithErrorHandler(func(http.ResponseWriter, *http.Request, error) { panic(boom) })}},
		{"the OnError hook", "fail", []nethttp.Option{nethttp.WithOnError(func(*http.Request, error) { panic(boom) })}},
	}
	for _, tt := range tests {
		t.Run("a panic in "+tt.name+" propagates and leaves no charge", func(t *testing.T) {
			opts := append(tt.opts, guardtest.TriggerRule(t))
			h := nethttp.New(newLimiter(t, nil, fixed(1, "per-ip")), opts...)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			for range 3 {
				func() {
					defer func() {
						if r := recover(); r != boom {
							t.Errorf("recovered %v, want the panic %q", r, boom)
						}
					}()
					r := httptest.NewRequest("GET", "/", nil)
					r.Header.Set(guardtest.TriggerHeader, tt.trigger)
					do(h, r)
				}()
			}
			if rec := do(h, httptest.NewRequest("GET", "/", nil)); rec.Code != 200 {
				t.Errorf("the next request = %d, want 200: the panicking ones left no charge", rec.Code)
			}
		})
	}
}

func TestAProxyOnAUnixSocket(t *testing.T) {
	guardtest.UnixSocketProxy(t, guardtest.ServeHTTP(func(lim *core.Limiter, key keyfuncs.Func) http.Handler {
		var opts []nethttp.Option
		if key != nil {
			opts = append(opts, nethttp.WithKey(key))
		}
		return nethttp.New(lim, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	}))
}

func TestHostileRequests(t *testing.T) {
	lim := newLimiter(t, nil, fixed(1000, "m"))
	h := nethttp.New(lim, nethttp.WithRule(newLimiter(t, nil, fixed(1000, "q")), guard.Optional(keyfuncs.Query("k"))))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	huge := strings.Repeat("9", 1<<20)
	tests := []struct {
		name   string
		mutate func(r *http.Request)
		want   int
	}{
		{"a megabyte of X-Forwarded-For is ignored", func(r *http.Request) { r.Header.Set("X-Forwarded-For", strings.Repeat("1.2.3.4, ", 100000)) }, 200},
		{"a garbage peer address is a 500", func(r *http.Request) { r.RemoteAddr = "\x00\xff" }, 500},
		{"an empty peer address is a 500", func(r *http.Request) { r.RemoteAddr = "" }, 500},
		{"a huge query key is a 400", func(r *http.Request) { r.URL.RawQuery = "k=" + huge }, 400},
		{"a bad escape in the query skips the rule", func(r *http.Request) { r.URL.RawQuery = "k=%zz" }, 200},
		{"header values with control bytes are ignored", func(r *http.Request) { r.Header.Set("RateLimit", "\r\n\x00") }, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			tt.mutate(r)
			if rec := do(h, r); rec.Code != tt.want {
				t.Errorf("status = %d, want %d", rec.Code, tt.want)
			}
		})
	}
}

func TestReportCostHelpers(t *testing.T) {
	for name, report := range map[string]func(r *http.Request) bool{
		"ReportCost":       func(r *http.Request) bool { return nethttp.ReportCost(r, 40) },
		"AddCost":          func(r *http.Request) bool { return nethttp.AddCost(r, 30) && nethttp.AddCost(r, 10) },
		"guard.ReportCost": func(r *http.Request) bool { return guard.ReportCost(r.Context(), 40) },
	} {
		t.Run(name+" settles the request at the cost reported", func(t *testing.T) {
			h := nethttp.New(newLimiter(t, nil, fixed(100, "m")), nethttp.WithReportedCost())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !report(r) {
					t.Error("no cost slot in the handler's request")
				}
			}))
			do(h, httptest.NewRequest("GET", "/", nil))
			// The second request's headers, set before its handler, show
			// the first settled at 40 and the second admitted at 1.
			if got := do(h, httptest.NewRequest("GET", "/", nil)).Header().Get("RateLimit"); got != `"m";r=59;t=60` {
				t.Errorf("RateLimit = %q, want r=59 (100 − 40 − 1)", got)
			}
		})
	}
	t.Run("without WithReportedCost the helpers report false", func(t *testing.T) {
		h := nethttp.New(newLimiter(t, nil, fixed(100, "m")))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if nethttp.ReportCost(r, 1) || nethttp.AddCost(r, 1) {
				t.Error("a cost slot without WithReportedCost")
			}
		}))
		do(h, httptest.NewRequest("GET", "/", nil))
	})
}

func TestLegacyResetOnTheGuardsClock(t *testing.T) {
	clock := guardtest.NewClock(guardtest.Epoch)
	h := nethttp.New(newLimiter(t, nil, fixed(10, "m")), nethttp.WithHeaders(guard.HeadersLegacy),
		nethttp.WithLegacyReset(guard.ResetUnix), nethttp.WithClock(clock))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	want := fmt.Sprint(guardtest.Epoch.Unix() + 60) // the fixed window ends a minute after the epoch
	if got := do(h, httptest.NewRequest("GET", "/", nil)).Header().Get(guard.HeaderXRateLimitReset); got != want {
		t.Errorf("X-RateLimit-Reset = %q, want %s", got, want)
	}
}

// The Denial the hooks receive keeps its Decision's States after the
// request: a request's States live in memory its chain lends to the
// requests after it (core.Limiter.AllowNInto), and a Denial takes a copy.
func TestADenialKeepsItsStatesAfterTheRequest(t *testing.T) {
	clock := guardtest.NewClock(guardtest.Epoch)
	store := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	t.Cleanup(func() { store.Close() })
	lim, err := core.New(store, fixed(2, "minute"), core.PerHour(100).Named("hour"))
	if err != nil {
		t.Fatal(err)
	}
	var kept *guard.Denial
	h := nethttp.New(lim, nethttp.WithOnDenied(func(_ *http.Request, d *guard.Denial) { kept = d }))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	from := func(addr string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		return r
	}
	for range 3 {
		do(h, from("192.0.2.1:1234"))
	}
	if kept == nil || len(kept.Decision.States) != 2 {
		t.Fatalf("the third request's Denial: %+v, want one with the States of 2 limits", kept)
	}
	want := slices.Clone(kept.Decision.States)
	for i := range 20 { // other clients, allowed: the chain states' memory is used again
		if rec := do(h, from(fmt.Sprintf("192.0.2.%d:1234", 2+i))); rec.Code != http.StatusOK {
			t.Fatalf("client %d: %d, want 200", 2+i, rec.Code)
		}
	}
	if !reflect.DeepEqual(kept.Decision.States, want) {
		t.Errorf("a kept Denial's States changed after the request:\n%+v\nwant\n%+v", kept.Decision.States, want)
	}
	if s := kept.Decision.States[0]; s.Allowed || s.Remaining != 0 {
		t.Errorf("the minute's state in the Denial: %+v, want denied with 0 remaining", s)
	}
}

// A request's chain lends its memory to one decision's States: with two
// rules of several limits each, and with two middlewares stacked on one
// chain, the second decision's States go elsewhere, and the headers list
// every policy of both, by its own name.
func TestTwoDecisionsOfSeveralLimitsKeepTheirOwnStates(t *testing.T) {
	clock := guardtest.NewClock(guardtest.Epoch)
	store := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	t.Cleanup(func() { store.Close() })
	newLim := func(name string) *core.Limiter {
		lim, err := core.New(store, core.PerMinute(100).Named(name+"-min"), core.PerHour(1000).Named(name+"-hour"), core.WithName(name))
		if err != nil {
			t.Fatal(err)
		}
		return lim
	}
	a, b := newLim("a"), newLim("b")
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	const want = `"a-min";q=100;w=60, "a-hour";q=1000;w=3600, "b-min";q=100;w=60, "b-hour";q=1000;w=3600`
	for name, h := range map[string]http.Handler{
		"two rules": nethttp.New(a, nethttp.WithRule(b, keyfuncs.Static("all")))(ok),
		"stacked":   nethttp.New(a)(nethttp.New(b)(ok)),
	} {
		for i := range 3 {
			rec := do(h, httptest.NewRequest("GET", "/", nil))
			if got := rec.Header().Get(guard.HeaderRateLimitPolicy); rec.Code != http.StatusOK || got != want {
				t.Errorf("%s, request %d: %d, RateLimit-Policy %s; want 200, %s", name, i, rec.Code, got, want)
			}
		}
	}
}
