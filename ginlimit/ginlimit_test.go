package ginlimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/ginlimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

var newLimiter = guardtest.NewLimiter

func fixed(n int64, name string) core.Limit {
	return core.PerMinute(n).WithAlgorithm(core.FixedWindow).Named(name)
}

// do sends method target to h, with header pairs.
func do(h http.Handler, method, target string, header ...string) *httptest.ResponseRecorder {
	return doReq(h, httptest.NewRequest(method, target, nil), header...)
}

func doReq(h http.Handler, r *http.Request, header ...string) *httptest.ResponseRecorder {
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func ok(c *gin.Context) { c.String(http.StatusOK, "ok") }

func TestNewPanicsOnProgrammerErrors(t *testing.T) {
	lim := newLimiter(t, nil, fixed(1, "m"))
	for name, f := range map[string]func(){
		"nil limiter":          func() { ginlimit.New(nil) },
		"negative cost":        func() { ginlimit.New(lim, ginlimit.WithCost(-1)) },
		"negative max delay":   func() { ginlimit.New(lim, ginlimit.WithMaxDelay(-time.Second)) },
		"nil limiter in rule":  func() { ginlimit.New(lim, ginlimit.WithRule(nil, keyfuncs.IP())) },
		"unknown header style": func() { ginlimit.New(lim, ginlimit.WithHeaders(guard.HeaderStyle(200))) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "ginlimit: New: ") {
					t.Errorf("New with a %s: recovered %v, want a ginlimit panic", name, r)
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
		opt    ginlimit.Option
	}{
		{"WithKeyFunc", ginlimit.WithKeyFunc(nil)},
		{"WithKey", ginlimit.WithKey(nil)},
		{"WithRule", ginlimit.WithRule(lim, nil)},
		{"WithRule", ginlimit.WithRule(lim, ginlimit.KeyFunc(nil))},
		{"WithCostFunc", ginlimit.WithCostFunc(nil)},
		{"WithSkip", ginlimit.WithSkip(nil)},
		{"WithDeniedHandler", ginlimit.WithDeniedHandler(nil)},
		{"WithErrorHandler", ginlimit.WithErrorHandler(nil)},
		{"WithRefundOn", ginlimit.WithRefundOn(nil)},
		{"WithResponseCost", ginlimit.WithResponseCost(nil)},
		{"WithOnDenied", ginlimit.WithOnDenied(nil)},
		{"WithOnError", ginlimit.WithOnError(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.option+" of nil panics in New, naming it", func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "ginlimit: New: ") || !strings.Contains(s, ": "+tt.option+": nil ") {
					t.Errorf("New(lim, %s(nil)) recovered %v, want a ginlimit panic naming %s", tt.option, r, tt.option)
				}
			}()
			ginlimit.New(lim, tt.opt)
		})
	}
}

func TestOmittedFunctionOptionsMeanTheDefault(t *testing.T) {
	lim := newLimiter(t, nil, fixed(1, "m"))
	r := gin.New()
	r.GET("/", ginlimit.New(lim), ok)
	if got := do(r, "GET", "/").Code; got != 200 {
		t.Errorf("first request = %d, want 200", got)
	}
	if rec := do(r, "GET", "/"); rec.Code != 429 || rec.Header().Get("Content-Type") != guard.ContentTypeProblem {
		t.Errorf("second request = %d %s, want the default 429", rec.Code, rec.Header().Get("Content-Type"))
	}
}

// TestAbortStopsTheChain checks the gin idiom: a denied or failed request
// aborts the chain, so later handlers do not run, and middleware before
// the limiter sees c.IsAborted(); a passed one is not aborted.
func TestAbortStopsTheChain(t *testing.T) {
	tests := []struct {
		name   string
		store  core.Store
		status []int
	}{
		{"a denial aborts", nil, []int{200, 429}},
		{"a store failure aborts", guardtest.FailingStore{}, []int{503}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newLimiter(t, tt.store, fixed(1, "m"))
			var ran []string
			aborted := false
			r := gin.New()
			r.Use(func(c *gin.Context) {
				c.Next()
				aborted = c.IsAborted()
			})
			r.Use(ginlimit.New(lim))
			r.Use(func(c *gin.Context) { ran = append(ran, "after") })
			r.GET("/", func(c *gin.Context) { ran = append(ran, "handler") })
			for i, want := range tt.status {
				ran = nil
				rec := do(r, "GET", "/")
				passed := want == 200
				wantRan := []string(nil)
				if passed {
					wantRan = []string{"after", "handler"}
				}
				if rec.Code != want || !slices.Equal(ran, wantRan) || aborted == passed {
					t.Errorf("request %d: status %d, ran %q, aborted %v; want %d, %q, %v",
						i, rec.Code, ran, aborted, want, wantRan, !passed)
				}
			}
		})
	}
}

// TestPerRouteAndGroup decorates one route and one group: requests
// elsewhere are not limited and carry no headers.
func TestPerRouteAndGroup(t *testing.T) {
	searchLim := newLimiter(t, nil, fixed(10, "search"))
	apiLim := newLimiter(t, nil, fixed(2, "api"))
	r := gin.New()
	r.POST("/search", ginlimit.New(searchLim, ginlimit.WithCost(5)), ok)
	api := r.Group("/api", ginlimit.New(apiLim))
	api.GET("/a", ok)
	api.GET("/b", ok)
	v2 := r.Group("/v2")
	v2.Use(ginlimit.New(newLimiter(t, nil, fixed(1, "v2"))))
	v2.GET("/c", ok)
	r.GET("/free", ok)

	tests := []struct {
		method, target string
		status         int
		rateLimit      string
	}{
		{"POST", "/search", 200, `"search";r=5;t=60`},
		{"GET", "/free", 200, ""},
		{"POST", "/search", 200, `"search";r=0;t=60`},
		{"POST", "/search", 429, `"search";r=0;t=60`},
		{"GET", "/api/a", 200, `"api";r=1;t=60`},
		{"GET", "/api/b", 200, `"api";r=0;t=60`}, // the group shares one limit
		{"GET", "/api/a", 429, `"api";r=0;t=60`},
		{"GET", "/v2/c", 200, `"v2";r=0;t=60`},
		{"GET", "/v2/c", 429, `"v2";r=0;t=60`},
		{"GET", "/free", 200, ""},
	}
	for i, tt := range tests {
		rec := do(r, tt.method, tt.target)
		if rec.Code != tt.status || rec.Header().Get("RateLimit") != tt.rateLimit {
			t.Errorf("request %d %s %s = %d %q, want %d %q", i, tt.method, tt.target,
				rec.Code, rec.Header().Get("RateLimit"), tt.status, tt.rateLimit)
		}
	}
}

// TestRouteKeyIsTheFullPath keys on c.FullPath(): one bucket per route
// pattern, whatever the parameters.
func TestRouteKeyIsTheFullPath(t *testing.T) {
	lim := newLimiter(t, nil, fixed(2, "per-route"))
	var keys []string
	r := gin.New()
	r.Use(ginlimit.New(lim, ginlimit.WithKey(keyfuncs.Route()),
		ginlimit.WithOnDenied(func(c *gin.Context, d *guard.Denial) { keys = append(keys, d.Key) })))
	r.GET("/items/:id", ok)
	r.GET("/users/:id", ok)
	tests := []struct {
		target string
		status int
	}{
		{"/items/1", 200},
		{"/items/2", 200},
		{"/items/3", 429},
		{"/users/1", 200},
		{"/nowhere", 400}, // no route: FullPath is "", a missing key
	}
	for _, tt := range tests {
		if got := do(r, "GET", tt.target).Code; got != tt.status {
			t.Errorf("GET %s = %d, want %d", tt.target, got, tt.status)
		}
	}
	if !slices.Equal(keys, []string{"/items/:id"}) {
		t.Errorf("denied keys %q, want [/items/:id]", keys)
	}

	t.Run("guard.Optional lets unrouted requests reach NoRoute", func(t *testing.T) {
		r := gin.New()
		r.Use(ginlimit.New(newLimiter(t, nil, fixed(2, "per-route")), ginlimit.WithKey(guard.Optional(keyfuncs.Route()))))
		if got := do(r, "GET", "/nowhere").Code; got != 404 {
			t.Errorf("GET /nowhere = %d, want 404", got)
		}
	})
}

// auth stands for an authentication middleware that stores the user.
func auth(c *gin.Context) {
	if u := c.GetHeader("X-User"); u != "" {
		c.Set("user", u)
	}
}

func userKey(c *gin.Context) (string, error) { return c.GetString("user"), nil }

func TestKeyFromAPreviousMiddleware(t *testing.T) {
	t.Run("a gin key function reads what c.Set stored", func(t *testing.T) {
		r := gin.New()
		r.Use(auth, ginlimit.New(newLimiter(t, nil, fixed(1, "per-user")), ginlimit.WithKeyFunc(userKey)))
		r.GET("/", ok)
		tests := []struct {
			user   string
			status int
		}{
			{"alice", 200},
			{"alice", 429},
			{"bob", 200},
			{"", 400}, // no user: an empty key is a missing key, never unlimited
		}
		for _, tt := range tests {
			if got := do(r, "GET", "/", "X-User", tt.user).Code; got != tt.status {
				t.Errorf("user %q: %d, want %d", tt.user, got, tt.status)
			}
		}
	})
	t.Run("an optional per-user rule exempts anonymous requests", func(t *testing.T) {
		r := gin.New()
		r.Use(auth, ginlimit.New(newLimiter(t, nil, fixed(3, "per-ip")),
			ginlimit.WithRule(newLimiter(t, nil, fixed(1, "per-user")), guard.Optional(ginlimit.KeyFunc(userKey)))))
		r.GET("/", ok)
		tests := []struct {
			user, rateLimit string
			status          int
		}{
			{"alice", `"per-ip";r=2;t=60, "per-user";r=0;t=60`, 200},
			{"", `"per-ip";r=1;t=60`, 200},
			{"alice", `"per-ip";r=1;t=60, "per-user";r=0;t=60`, 429}, // per-ip took 1, then refunded it: r after the refund
			{"", `"per-ip";r=0;t=60`, 200},                           // so this one fits
			{"", `"per-ip";r=0;t=60`, 429},
		}
		for i, tt := range tests {
			rec := do(r, "GET", "/", "X-User", tt.user)
			if rec.Code != tt.status || rec.Header().Get("RateLimit") != tt.rateLimit {
				t.Errorf("request %d (user %q) = %d %q, want %d %q", i, tt.user, rec.Code, rec.Header().Get("RateLimit"), tt.status, tt.rateLimit)
			}
		}
	})
	t.Run("KeyFunc bounds the key", func(t *testing.T) {
		r := gin.New()
		r.Use(ginlimit.New(newLimiter(t, nil, fixed(5, "m")), ginlimit.WithKeyFunc(func(c *gin.Context) (string, error) {
			return c.GetHeader("X-Key"), nil
		})))
		r.GET("/", ok)
		if got := do(r, "GET", "/", "X-Key", strings.Repeat("k", keyfuncs.MaxKeyLen+1)).Code; got != 400 {
			t.Errorf("a key of %d bytes: %d, want 400", keyfuncs.MaxKeyLen+1, got)
		}
		if got := do(r, "GET", "/", "X-Key", strings.Repeat("k", keyfuncs.MaxKeyLen)).Code; got != 200 {
			t.Errorf("a key of %d bytes: %d, want 200", keyfuncs.MaxKeyLen, got)
		}
	})
}

type stringer string

func (s *stringer) String() string { return string(*s) }

func TestValue(t *testing.T) {
	bob := stringer("bob")
	tests := []struct {
		name    string
		value   any
		want    string
		wantErr error
	}{
		{"a string is the key", "alice", "alice", nil},
		{"a Stringer gives its string", &bob, "bob", nil},
		{"a missing value has no key", nil, "", keyfuncs.ErrNoKey},
		{"an empty string has no key", "", "", keyfuncs.ErrNoKey},
		{"a nil Stringer has no key", (*stringer)(nil), "", keyfuncs.ErrNoKey},
		{"another type has no key", 42, "", keyfuncs.ErrNoKey},
		{"a huge value is refused", strings.Repeat("u", keyfuncs.MaxKeyLen+1), "", keyfuncs.ErrKeyTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			var err error
			r := gin.New()
			r.Use(func(c *gin.Context) {
				if tt.value != nil {
					c.Set("user", tt.value)
				}
			}, ginlimit.New(newLimiter(t, nil, fixed(100, "m")), guard.WithSkip(func(r keyfuncs.Request) bool {
				got, err = ginlimit.Value("user")(r)
				return true
			})))
			r.GET("/", ok)
			do(r, "GET", "/")
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("Value(%q) with %#v = %q, %v; want %q, %v", "user", tt.value, got, err, tt.want, tt.wantErr)
			}
		})
	}
	t.Run("a request not from gin has no key", func(t *testing.T) {
		_, err := ginlimit.Value("user")(keyfuncs.FromHTTP(httptest.NewRequest("GET", "/", nil)))
		if err == nil {
			t.Error("Value on a net/http request = nil error, want one")
		}
	})
}

func TestKeyFuncOutsideGin(t *testing.T) {
	fn := ginlimit.KeyFunc(userKey)
	if _, err := fn(keyfuncs.FromHTTP(httptest.NewRequest("GET", "/", nil))); err == nil {
		t.Error("KeyFunc over a request not from ginlimit: nil error")
	}
	if c := ginlimit.Context(keyfuncs.FromHTTP(httptest.NewRequest("GET", "/", nil))); c != nil {
		t.Errorf("Context of a net/http request = %p, want nil", c)
	}
}

// TestSettleFromTheRealResponse checks that WithResponseCost sees what
// gin sends: c.Writer.Status() and Size() after the chain.
func TestSettleFromTheRealResponse(t *testing.T) {
	var got guard.Result
	r := gin.New()
	r.Use(ginlimit.New(newLimiter(t, nil, fixed(100, "m")),
		ginlimit.WithResponseCost(func(res guard.Result) int64 { got = res; return 1 })))
	r.GET("/string", func(c *gin.Context) { c.String(http.StatusCreated, "hello") })
	r.GET("/json", func(c *gin.Context) { c.JSON(http.StatusAccepted, gin.H{"a": 1}) })
	r.GET("/status", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	r.GET("/nothing", func(c *gin.Context) {})
	r.GET("/abort", func(c *gin.Context) { c.AbortWithStatus(http.StatusServiceUnavailable) })
	r.GET("/twice", func(c *gin.Context) { c.String(200, "ab"); c.String(200, "cd") })
	tests := []struct {
		target string
		want   guard.Result
	}{
		{"/string", guard.Result{Status: 201, Bytes: 5}},
		{"/json", guard.Result{Status: 202, Bytes: 7}},
		{"/status", guard.Result{Status: 204}},
		{"/nothing", guard.Result{Status: 200}},
		{"/abort", guard.Result{Status: 503}},
		{"/twice", guard.Result{Status: 200, Bytes: 4}},
		// gin writes its "404 page not found" after the chain returns,
		// so the chain saw no bytes.
		{"/unrouted", guard.Result{Status: 404}},
	}
	for _, tt := range tests {
		got = guard.Result{}
		rec := do(r, "GET", tt.target)
		if got != tt.want {
			t.Errorf("GET %s: settled with %+v, want %+v", tt.target, got, tt.want)
		}
		if rec.Code != tt.want.Status {
			t.Errorf("GET %s: sent %d, settled with %d", tt.target, rec.Code, tt.want.Status)
		}
	}
}

func TestRefundOnServerErrors(t *testing.T) {
	r := gin.New()
	r.Use(ginlimit.New(newLimiter(t, nil, fixed(1, "m")), ginlimit.WithRefundOn(guard.ServerErrors)))
	r.GET("/fail", func(c *gin.Context) { c.JSON(http.StatusBadGateway, gin.H{"error": "upstream"}) })
	r.GET("/", ok)
	for i, tt := range []struct {
		target string
		status int
	}{{"/fail", 502}, {"/fail", 502}, {"/", 200}, {"/", 429}} {
		if got := do(r, "GET", tt.target).Code; got != tt.status {
			t.Errorf("request %d GET %s = %d, want %d", i, tt.target, got, tt.status)
		}
	}
}

func TestReportedCostFromTheHandler(t *testing.T) {
	r := gin.New()
	r.Use(ginlimit.New(newLimiter(t, nil, fixed(100, "m")), ginlimit.WithReportedCost()))
	r.GET("/gin", func(c *gin.Context) {
		if !ginlimit.ReportCost(c, 40) {
			t.Error("ginlimit.ReportCost found no cost slot")
		}
		c.Status(http.StatusNoContent)
	})
	r.GET("/guard", func(c *gin.Context) {
		if !guard.ReportCost(c.Request.Context(), 9) {
			t.Error("guard.ReportCost(c.Request.Context()) found no cost slot")
		}
	})
	r.GET("/add", func(c *gin.Context) {
		done := make(chan bool)
		cc := c.Copy()
		go func() { done <- ginlimit.AddCost(cc, 2) }()
		if !<-done || !ginlimit.AddCost(c, 3) {
			t.Error("AddCost found no cost slot")
		}
	})
	r.GET("/", ok)
	steps := []struct{ target, rateLimit string }{
		{"/gin", `"m";r=99;t=60`},   // 100 − 1 admitted, then 39 more charged
		{"/", `"m";r=59;t=60`},      // 100 − 40 − 1
		{"/guard", `"m";r=58;t=60`}, // then 8 more
		{"/add", `"m";r=49;t=60`},   // then 4 more
		{"/", `"m";r=44;t=60`},      // 100 − 40 − 1 − 9 − 5 − 1
	}
	for _, s := range steps {
		if got := do(r, "GET", s.target).Header().Get("RateLimit"); got != s.rateLimit {
			t.Errorf("GET %s: RateLimit %q, want %q", s.target, got, s.rateLimit)
		}
	}
	t.Run("without WithReportedCost the helpers report false", func(t *testing.T) {
		r := gin.New()
		r.Use(ginlimit.New(newLimiter(t, nil, fixed(100, "m"))))
		r.GET("/", func(c *gin.Context) {
			if ginlimit.ReportCost(c, 1) || ginlimit.AddCost(c, 1) {
				t.Error("a cost slot without WithReportedCost")
			}
		})
		do(r, "GET", "/")
	})
}

// A request may carry a context of a type == cannot compare (a struct
// value with a slice field): the middleware passes it on, and does not
// panic comparing it with the context it hands the handler.
func TestAnUncomparableRequestContextPassesThrough(t *testing.T) {
	for _, reported := range []bool{false, true} {
		var opts []ginlimit.Option
		if reported {
			opts = append(opts, ginlimit.WithReportedCost())
		}
		r := gin.New()
		r.Use(ginlimit.New(newLimiter(t, nil, fixed(100, "m")), opts...))
		r.GET("/", func(c *gin.Context) {
			if c.Request.Context().Value(guardtest.UncomparableKey{}) != "seen" {
				t.Error("the handler's context lost the request's")
			}
			if reported && !ginlimit.ReportCost(c, 10) {
				t.Error("ReportCost found no slot in the handler's context")
			}
		})
		req := httptest.NewRequest("GET", "/", nil)
		rec := doReq(r, req.WithContext(guardtest.UncomparableContext(req.Context())))
		if got := rec.Header().Get("RateLimit"); rec.Code != http.StatusOK || got != `"m";r=99;t=60` {
			t.Errorf("reported cost %v: status %d, RateLimit %q; want 200, r=99", reported, rec.Code, got)
		}
	}
}

// A handler may leave a request of its own in c.Request, whose context it
// cancels as it returns (a timeout): the request was served all the same,
// and the adaptive limit takes its latency as a sample.
func TestAdaptiveSamplesTheRequestNotAContextAHandlerLeft(t *testing.T) {
	clock := guardtest.NewClock(guardtest.Epoch)
	ad := guardtest.FixedAdaptive(t, clock, 5)
	r := gin.New()
	r.Use(ginlimit.New(nil, ginlimit.WithAdaptive(ad)))
	r.GET("/", func(c *gin.Context) {
		ctx, cancel := context.WithCancel(c.Request.Context())
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		clock.Advance(30 * time.Millisecond)
		c.Status(http.StatusOK)
	})
	if rec := do(r, "GET", "/"); rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200", rec.Code)
	}
	if s := ad.Stats(); s.InFlight != 0 || s.Latency != 30*time.Millisecond {
		t.Errorf("Stats() = %+v, want nothing in flight and the request's 30ms as a sample", s)
	}
}

func TestHeadersAreSetBeforeTheHandler(t *testing.T) {
	r := gin.New()
	r.Use(ginlimit.New(newLimiter(t, nil, fixed(2, "m"))))
	var seen string
	r.GET("/", func(c *gin.Context) { seen = c.Writer.Header().Get("RateLimit") })
	do(r, "GET", "/")
	if seen != `"m";r=1;t=60` {
		t.Errorf("the handler saw RateLimit %q, want it set", seen)
	}
}

func TestLeakyBucketWaitIsCancelledWithTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, nil, core.Per(1, time.Second).WithAlgorithm(core.LeakyBucket).WithBurst(10).Named("leaky"))
		handled := 0
		r := gin.New()
		r.Use(ginlimit.New(lim, ginlimit.WithMaxDelay(time.Minute)))
		r.GET("/", func(c *gin.Context) { handled++ })
		do(r, "GET", "/") // the next one waits 1s
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(300 * time.Millisecond)
			cancel()
		}()
		start := time.Now()
		rec := doReq(r, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
		if rec.Code != 503 || time.Since(start) != 300*time.Millisecond || handled != 1 {
			t.Errorf("cancelled wait: %d after %v, %d handled; want 503 after 300ms, 1 handled", rec.Code, time.Since(start), handled)
		}
		start = time.Now()
		if rec := do(r, "GET", "/"); rec.Code != 200 || time.Since(start) != time.Second {
			t.Errorf("next request: %d after %v; want 200 after 1s (the cancelled one's turn, the last in the queue, given back)", rec.Code, time.Since(start))
		}
	})
}

func TestHangingStoreEndsWithTheRequest(t *testing.T) {
	r := gin.New()
	r.Use(ginlimit.New(newLimiter(t, guardtest.HangingStore{}, fixed(1, "m"))))
	r.GET("/", func(c *gin.Context) { t.Error("handler ran") })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	rec := doReq(r, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
	if rec.Code != 503 || rec.Body.String() != guardtest.ProblemStatus(503) {
		t.Errorf("hanging store: %d %s; want 503 with a generic body", rec.Code, rec.Body)
	}
}

// TestErrorsNeverLeakText checks that no error's text reaches the client,
// and that the errors still reach the error handler and the hook intact.
func TestErrorsNeverLeakText(t *testing.T) {
	errSecret := errors.New("secret: db at 10.0.0.7 said no")
	tests := []struct {
		name   string
		store  core.Store
		opts   []ginlimit.Option
		status int
		kind   error
	}{
		{"a key function error is a 400", nil, []ginlimit.Option{ginlimit.WithKeyFunc(func(*gin.Context) (string, error) { return "", errSecret })}, 400, guard.ErrKey},
		{"a cost function error is a 400", nil, []ginlimit.Option{ginlimit.WithCostFunc(func(*gin.Context) (int64, error) { return 0, errSecret })}, 400, guard.ErrCost},
		{"a store failure is a 503", guardtest.FailingStore{Err: errSecret}, nil, 503, guard.ErrLimiter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logged []error
			opts := append(tt.opts, ginlimit.WithOnError(func(c *gin.Context, err error) { logged = append(logged, err) }))
			r := gin.New()
			r.Use(ginlimit.New(newLimiter(t, tt.store, fixed(1, "m")), opts...))
			r.GET("/", ok)
			rec := do(r, "GET", "/")
			if rec.Code != tt.status || rec.Body.String() != guardtest.ProblemStatus(tt.status) {
				t.Errorf("status %d body %s, want %d with a generic body", rec.Code, rec.Body, tt.status)
			}
			for k, v := range rec.Header() {
				if strings.Contains(strings.Join(v, " "), "secret") {
					t.Errorf("header %s leaks the error: %q", k, v)
				}
			}
			if len(logged) != 1 || !errors.Is(logged[0], tt.kind) || !errors.Is(logged[0], errSecret) {
				t.Errorf("WithOnError got %v, want one error matching %v and the cause", logged, tt.kind)
			}
		})
	}
}

// TestGinTypedOptions runs every option over *gin.Context.
func TestGinTypedOptions(t *testing.T) {
	var denied, errored int
	r := gin.New()
	r.Use(ginlimit.New(newLimiter(t, nil, fixed(3, "m")),
		ginlimit.WithKeyFunc(func(c *gin.Context) (string, error) {
			if u := c.Query("user"); u != "" {
				return u, nil
			}
			return "", errors.New("no user")
		}),
		ginlimit.WithCostFunc(func(c *gin.Context) (int64, error) { return int64(len(c.QueryArray("x"))), nil }),
		ginlimit.WithSkip(func(c *gin.Context) bool { return c.Request.Method == http.MethodOptions }),
		ginlimit.WithDeniedHandler(func(c *gin.Context, d *guard.Denial) {
			c.JSON(http.StatusTeapot, gin.H{"denied": c.Query("user"), "retry": d.RetryAfter.Seconds()})
		}),
		ginlimit.WithErrorHandler(func(c *gin.Context, err error) {
			c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "who are you?"})
		}),
		ginlimit.WithOnDenied(func(c *gin.Context, d *guard.Denial) { denied++ }),
		ginlimit.WithOnError(func(c *gin.Context, err error) { errored++ }),
	))
	r.Any("/", ok)
	tests := []struct {
		method, target string
		status         int
		body           string
	}{
		{"GET", "/?user=a&x&x", 200, "ok"},
		{"GET", "/?user=a&x&x", 418, `{"denied":"a","retry":60}`},
		{"GET", "/", 401, `{"error":"who are you?"}`},
		{"OPTIONS", "/", 200, "ok"},
		{"GET", "/?user=a&x", 200, "ok"},
	}
	for i, tt := range tests {
		rec := do(r, tt.method, tt.target)
		if rec.Code != tt.status || rec.Body.String() != tt.body {
			t.Errorf("request %d %s %s = %d %s, want %d %s", i, tt.method, tt.target, rec.Code, rec.Body, tt.status, tt.body)
		}
	}
	if denied != 1 || errored != 1 {
		t.Errorf("hooks: %d denials, %d errors; want 1 and 1", denied, errored)
	}
	if rec := do(r, "GET", "/?user=a&x&x"); rec.Header().Get("RateLimit") == "" || rec.Header().Get("Retry-After") != "60" {
		t.Errorf("the gin denied handler's response lacks the rate-limit headers: %v", rec.Header())
	}
}

// TestTrustModel checks that gin's client-address settings never choose
// the key, and that keyfuncs.IP with trusted proxies does.
func TestTrustModel(t *testing.T) {
	build := func(t *testing.T, key keyfuncs.Func) *gin.Engine {
		r := gin.New()
		r.TrustedPlatform = gin.PlatformCloudflare // believed from anyone by c.ClientIP
		r.Use(ginlimit.New(newLimiter(t, nil, fixed(1, "m")), ginlimit.WithKey(key)))
		r.GET("/", ok)
		return r
	}
	req := func(peer, cf string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = peer
		r.Header.Set("CF-Connecting-IP", cf)
		r.Header.Set("X-Forwarded-For", cf)
		return r
	}
	t.Run("by default a client cannot pick its key with forwarding headers", func(t *testing.T) {
		r := build(t, keyfuncs.IP())
		if got := doReq(r, req("203.0.113.7:1", "198.51.100.1")).Code; got != 200 {
			t.Fatalf("first request = %d", got)
		}
		if got := doReq(r, req("203.0.113.7:1", "198.51.100.2")).Code; got != 429 {
			t.Errorf("a fresh CF-Connecting-IP from the same peer = %d, want 429", got)
		}
	})
	t.Run("a trusted proxy's header is the key", func(t *testing.T) {
		r := build(t, keyfuncs.IP(keyfuncs.TrustLoopback(), keyfuncs.FromHeader("CF-Connecting-IP")))
		for i, tt := range []struct {
			peer, cf string
			status   int
		}{
			{"127.0.0.1:1", "198.51.100.1", 200},
			{"127.0.0.1:2", "198.51.100.2", 200},
			{"127.0.0.1:3", "198.51.100.1", 429},
			{"203.0.113.7:1", "198.51.100.3", 200}, // untrusted peer: keyed on the peer
			{"203.0.113.7:1", "198.51.100.4", 429},
		} {
			if got := doReq(r, req(tt.peer, tt.cf)).Code; got != tt.status {
				t.Errorf("request %d from %s with %s = %d, want %d", i, tt.peer, tt.cf, got, tt.status)
			}
		}
	})
}

func TestDryRunNeverAborts(t *testing.T) {
	r := gin.New()
	aborted := false
	r.Use(func(c *gin.Context) { c.Next(); aborted = c.IsAborted() })
	r.Use(ginlimit.New(newLimiter(t, guardtest.FailingStore{}, fixed(1, "m")), ginlimit.WithDryRun(true)))
	r.GET("/", ok)
	if rec := do(r, "GET", "/"); rec.Code != 200 || aborted {
		t.Errorf("dry run over a failing store: %d, aborted %v; want 200, not aborted", rec.Code, aborted)
	}
}

func TestPanicIsSettledAndRecovered(t *testing.T) {
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, _ any) { c.AbortWithStatus(500) }))
	r.Use(ginlimit.New(newLimiter(t, nil, fixed(1, "m")), ginlimit.WithRefundOn(guard.ServerErrors)))
	r.GET("/panic", func(c *gin.Context) { panic("boom") })
	r.GET("/", ok)
	if got := do(r, "GET", "/panic").Code; got != 500 {
		t.Errorf("panicking handler = %d, want 500 from gin's recovery", got)
	}
	if got := do(r, "GET", "/").Code; got != 200 {
		t.Errorf("after a panicking request: %d, want 200 (refunded as a 500)", got)
	}
}

func TestHostileRequests(t *testing.T) {
	r := gin.New()
	r.Use(ginlimit.New(newLimiter(t, nil, fixed(1000, "m")),
		ginlimit.WithRule(newLimiter(t, nil, fixed(1000, "q")), guard.Optional(keyfuncs.Query("k")))))
	r.GET("/", ok)
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
			req := httptest.NewRequest("GET", "/", nil)
			tt.mutate(req)
			if rec := doReq(r, req); rec.Code != tt.want {
				t.Errorf("status = %d, want %d", rec.Code, tt.want)
			}
		})
	}
}

func TestPanicsInConfiguredFunctionsLeaveNoCharge(t *testing.T) {
	const boom = guardtest.Boom
	when := func(c *gin.Context, trigger string) bool { return c.GetHeader(guardtest.TriggerHeader) == trigger }
	tests := []struct {
		name, trigger string
		opts          []ginlimit.Option
	}{
		{"a later rule's key function", "panic", nil},
		{"the cost function", "panic", []ginlimit.Option{ginlimit.WithCostFunc(func(c *gin.Context) (int64, error) {
			if when(c, "panic") {
				panic(boom)
			}
			return 1, nil
		})}},
		{"the skip function", "panic", []ginlimit.Option{ginlimit.WithSkip(func(c *gin.Context) bool {
			if when(c, "panic") {
				panic(boom)
			}
			return false
		})}},
		{"the denied handler", "deny", []ginlimit.Option{ginlimit.WithDeniedHandler(func(*gin.Context, *guard.Denial) { panic(boom) })}},
		{"the OnDenied hook", "deny", []ginlimit.Option{ginlimit.WithOnDenied(func(*gin.Context, *guard.Denial) { panic(boom) })}},
		{"the error handler", "fail", []ginlimit.Option{ginlimit.WithErrorHandler(func(*gin.Context, error) { panic(boom) })}},
		{"the OnError hook", "fail", []ginlimit.Option{ginlimit.WithOnError(func(*gin.Context, error) { panic(boom) })}},
	}
	for _, tt := range tests {
		t.Run("a panic in "+tt.name+" reaches gin's recovery and leaves no charge", func(t *testing.T) {
			var recovered []any
			r := gin.New()
			r.Use(gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, err any) {
				recovered = append(recovered, err)
				c.AbortWithStatus(500)
			}))
			r.Use(ginlimit.New(newLimiter(t, nil, fixed(1, "per-ip")), append(tt.opts, guardtest.TriggerRule(t))...))
			r.GET("/", ok)
			for i := range 3 {
				if got := do(r, "GET", "/", guardtest.TriggerHeader, tt.trigger).Code; got != 500 {
					t.Errorf("request %d with %s = %d, want 500 from gin's recovery", i, tt.trigger, got)
				}
			}
			if len(recovered) != 3 || recovered[0] != boom {
				t.Errorf("gin recovered %v, want the panic %q three times", recovered, boom)
			}
			if got := do(r, "GET", "/").Code; got != 200 {
				t.Errorf("the next request = %d, want 200: the panicking ones left no charge", got)
			}
		})
	}
}
