package echolimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/echolimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

var newLimiter = guardtest.NewLimiter

func fixed(n int64, name string) core.Limit {
	return core.PerMinute(n).WithAlgorithm(core.FixedWindow).Named(name)
}

func do(h http.Handler, method, target string) *httptest.ResponseRecorder {
	return doReq(h, httptest.NewRequest(method, target, nil))
}

func doReq(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func ok(c echo.Context) error { return c.String(http.StatusOK, "ok") }

// step is a request and the status and RateLimit header it must get.
type step struct {
	method, target string
	status         int
	rateLimit      string // "-" means absent
}

func run(t *testing.T, h http.Handler, steps []step) {
	t.Helper()
	for i, s := range steps {
		method := s.method
		if method == "" {
			method = http.MethodGet
		}
		rec := do(h, method, s.target)
		got := rec.Header().Get("RateLimit")
		if _, ok := rec.Header()["Ratelimit"]; !ok {
			got = "-"
		}
		if rec.Code != s.status || got != s.rateLimit {
			t.Errorf("step %d: %s %s = %d, RateLimit %s; want %d, %s (body %q)",
				i, method, s.target, rec.Code, got, s.status, s.rateLimit, rec.Body)
		}
	}
}

func TestNewPanicsOnProgrammerErrors(t *testing.T) {
	lim := newLimiter(t, nil, fixed(1, "m"))
	for name, f := range map[string]func(){
		"nil limiter":               func() { echolimit.New(nil) },
		"negative cost":             func() { echolimit.New(lim, echolimit.WithCost(-1)) },
		"negative max delay":        func() { echolimit.New(lim, echolimit.WithMaxDelay(-time.Second)) },
		"nil limiter in a rule":     func() { echolimit.New(lim, echolimit.WithRule(nil, nil)) },
		"unknown header style":      func() { echolimit.New(lim, echolimit.WithHeaders(guard.HeaderStyle(200))) },
		"config without a limiter":  func() { echolimit.NewWithConfig(echolimit.Config{}) },
		"config with negative cost": func() { echolimit.NewWithConfig(echolimit.Config{Limiter: lim, Cost: -2}) },
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
		opt    echolimit.Option
	}{
		{"WithKeyFunc", echolimit.WithKeyFunc(nil)},
		{"WithKey", echolimit.WithKey(nil)},
		{"WithRule", echolimit.WithRule(lim, nil)},
		{"WithRule", echolimit.WithRule(lim, echolimit.KeyFunc(nil))},
		{"WithCostFunc", echolimit.WithCostFunc(nil)},
		{"WithSkipper", echolimit.WithSkipper(nil)},
		{"WithDeniedHandler", echolimit.WithDeniedHandler(nil)},
		{"WithErrorHandler", echolimit.WithErrorHandler(nil)},
		{"WithRefundOn", echolimit.WithRefundOn(nil)},
		{"WithResponseCost", echolimit.WithResponseCost(nil)},
		{"WithOnDenied", echolimit.WithOnDenied(nil)},
		{"WithOnError", echolimit.WithOnError(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.option+" of nil panics in New, naming it", func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "echolimit: New: ") || !strings.Contains(s, ": "+tt.option+": nil ") {
					t.Errorf("New(lim, %s(nil)) recovered %v, want an echolimit panic naming %s", tt.option, r, tt.option)
				}
			}()
			echolimit.New(lim, tt.opt)
		})
	}
}

func TestSkipper(t *testing.T) {
	health := func(c echo.Context) bool { return c.Path() == "/health" }
	for name, mw := range map[string]func(lim *core.Limiter) echo.MiddlewareFunc{
		"WithSkipper": func(lim *core.Limiter) echo.MiddlewareFunc {
			return echolimit.New(lim, echolimit.WithSkipper(health))
		},
		"Config.Skipper": func(lim *core.Limiter) echo.MiddlewareFunc {
			return echolimit.NewWithConfig(echolimit.Config{Limiter: lim, Skipper: health})
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := echo.New()
			e.Use(mw(newLimiter(t, nil, fixed(1, "m"))))
			e.GET("/health", ok)
			e.GET("/", ok)
			run(t, e, []step{
				{target: "/health", status: 200, rateLimit: "-"},
				{target: "/", status: 200, rateLimit: `"m";r=0;t=60`},
				{target: "/health", status: 200, rateLimit: "-"},
				{target: "/", status: 429, rateLimit: `"m";r=0;t=60`},
			})
		})
	}
	t.Run("a nil Config.Skipper skips nothing, as middleware.DefaultSkipper", func(t *testing.T) {
		e := echo.New()
		e.Use(echolimit.NewWithConfig(echolimit.Config{Limiter: newLimiter(t, nil, fixed(1, "m")), Skipper: nil}))
		e.GET("/", ok)
		run(t, e, []step{{target: "/", status: 200, rateLimit: `"m";r=0;t=60`}, {target: "/", status: 429, rateLimit: `"m";r=0;t=60`}})
	})
	var _ middleware.Skipper = health
}

func TestRouteAndGroupDecoration(t *testing.T) {
	e := echo.New()
	search := echolimit.New(newLimiter(t, nil, fixed(10, "search")), echolimit.WithCost(5))
	e.POST("/search", ok, search)
	e.GET("/free", ok)
	api := e.Group("/api", echolimit.New(newLimiter(t, nil, fixed(1, "api"))))
	api.GET("/a", ok)
	api.GET("/b", ok)
	run(t, e, []step{
		{method: "POST", target: "/search", status: 200, rateLimit: `"search";r=5;t=60`},
		{method: "POST", target: "/search", status: 200, rateLimit: `"search";r=0;t=60`},
		{method: "POST", target: "/search", status: 429, rateLimit: `"search";r=0;t=60`},
		{target: "/free", status: 200, rateLimit: "-"},
		{target: "/free", status: 200, rateLimit: "-"},
		{target: "/api/a", status: 200, rateLimit: `"api";r=0;t=60`},
		{target: "/api/b", status: 429, rateLimit: `"api";r=0;t=60`}, // one limit for the whole group
		{target: "/api/nope", status: 429, rateLimit: `"api";r=0;t=60`},
		{target: "/free", status: 200, rateLimit: "-"},
	})
}

func TestRouteKeyIsTheEchoPath(t *testing.T) {
	t.Run("per route, c.Path() keys every path of a route together", func(t *testing.T) {
		e := echo.New()
		e.Use(echolimit.New(newLimiter(t, nil, fixed(2, "route")), echolimit.WithKey(keyfuncs.Route())))
		e.GET("/items/:id", ok)
		e.GET("/users/:id", ok)
		run(t, e, []step{
			{target: "/items/1", status: 200, rateLimit: `"route";r=1;t=60`},
			{target: "/items/2", status: 200, rateLimit: `"route";r=0;t=60`},
			{target: "/items/3", status: 429, rateLimit: `"route";r=0;t=60`},
			{target: "/users/1", status: 200, rateLimit: `"route";r=1;t=60`},
		})
	})
	t.Run("an unmatched request has no route, and a rule made Optional exempts it", func(t *testing.T) {
		e := echo.New()
		e.Use(echolimit.New(newLimiter(t, nil, fixed(2, "ip")),
			echolimit.WithRule(newLimiter(t, nil, fixed(2, "route")), guard.Optional(keyfuncs.Route()))))
		e.GET("/items/:id", ok)
		run(t, e, []step{
			{target: "/nope", status: 404, rateLimit: `"ip";r=1;t=60`},
			{target: "/items/1", status: 200, rateLimit: `"ip";r=0;t=60, "route";r=1;t=60`},
		})
	})
	t.Run("an unmatched request with a required route key is a 400", func(t *testing.T) {
		e := echo.New()
		e.Use(echolimit.New(newLimiter(t, nil, fixed(2, "route")), echolimit.WithKey(keyfuncs.Route())))
		run(t, e, []step{{target: "/nope", status: 400, rateLimit: "-"}})
	})
}

// auth stores the user of the X-User header under "user", as an
// authentication middleware would.
func auth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if u := c.Request().Header.Get("X-User"); u != "" {
			c.Set("user", u)
		}
		return next(c)
	}
}

func TestKeyFromAnAuthMiddleware(t *testing.T) {
	typed := echolimit.WithKeyFunc(func(c echo.Context) (string, error) {
		u, _ := c.Get("user").(string)
		return u, nil // "" fails with 400
	})
	for name, opt := range map[string]echolimit.Option{
		"typed key function": typed,
		"Value":              echolimit.WithKey(echolimit.Value("user")),
		"KeyFunc":            echolimit.WithKey(echolimit.KeyFunc(func(c echo.Context) (string, error) { s, _ := c.Get("user").(string); return s, nil })),
	} {
		t.Run(name, func(t *testing.T) {
			e := echo.New()
			e.Use(auth, echolimit.New(newLimiter(t, nil, fixed(1, "user")), opt))
			e.GET("/", ok)
			for i, tt := range []struct {
				user string
				want int
			}{{"alice", 200}, {"alice", 429}, {"bob", 200}, {"", 400}} {
				r := httptest.NewRequest("GET", "/", nil)
				if tt.user != "" {
					r.Header.Set("X-User", tt.user)
				}
				if rec := doReq(e, r); rec.Code != tt.want {
					t.Errorf("request %d as %q = %d, want %d", i, tt.user, rec.Code, tt.want)
				}
			}
		})
	}
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
			e := echo.New()
			e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(c echo.Context) error {
					if tt.value != nil {
						c.Set("user", tt.value)
					}
					return next(c)
				}
			})
			e.Use(echolimit.New(newLimiter(t, nil, fixed(100, "m")),
				guard.WithSkip(func(r keyfuncs.Request) bool {
					got, err = echolimit.Value("user")(r)
					return true
				})))
			e.GET("/", ok)
			do(e, "GET", "/")
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("Value(%q) with %#v = %q, %v; want %q, %v", "user", tt.value, got, err, tt.want, tt.wantErr)
			}
		})
	}
	t.Run("a request not from echolimit has no echo context", func(t *testing.T) {
		r := keyfuncs.FromHTTP(httptest.NewRequest("GET", "/", nil))
		if _, err := echolimit.Value("user")(r); err == nil {
			t.Error("Value on a net/http request: nil error")
		}
		if c := echolimit.Context(r); c != nil {
			t.Errorf("Context of a net/http request = %v, want nil", c)
		}
	})
}

func TestSettleWithTheStatusSent(t *testing.T) {
	errTeapot := errors.New("teapot")
	newEcho := func(t *testing.T, opts ...echolimit.Option) (*echo.Echo, *[]error) {
		var seen []error // what an outer middleware sees
		e := echo.New()
		e.HTTPErrorHandler = func(err error, c echo.Context) {
			if errors.Is(err, errTeapot) {
				c.NoContent(http.StatusBadGateway) // a custom mapping: the status sent is 502
				return
			}
			e.DefaultHTTPErrorHandler(err, c)
		}
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				err := next(c)
				seen = append(seen, err)
				return err
			}
		})
		e.Use(echolimit.New(newLimiter(t, nil, fixed(1, "m")), opts...))
		e.GET("/http-error", func(c echo.Context) error { return echo.NewHTTPError(http.StatusServiceUnavailable, "down") })
		e.GET("/plain-error", func(c echo.Context) error { return errTeapot })
		e.GET("/not-found", func(c echo.Context) error { return echo.ErrNotFound })
		e.GET("/", ok)
		return e, &seen
	}

	t.Run("an *echo.HTTPError with a 5xx is refunded", func(t *testing.T) {
		e, seen := newEcho(t, echolimit.WithRefundOn(guard.ServerErrors))
		run(t, e, []step{
			{target: "/http-error", status: 503, rateLimit: `"m";r=0;t=60`},
			{target: "/plain-error", status: 502, rateLimit: `"m";r=0;t=60`},
			{target: "/not-found", status: 404, rateLimit: `"m";r=0;t=60`},
			{target: "/", status: 429, rateLimit: `"m";r=0;t=60`},
		})
		for i, err := range *seen {
			if err != nil {
				t.Errorf("request %d: the outer middleware saw %v, want nil: the error was committed", i, err)
			}
		}
	})
	t.Run("the response cost sees the status and size of the error response", func(t *testing.T) {
		var got []guard.Result
		e, _ := newEcho(t, echolimit.WithResponseCost(func(r guard.Result) int64 { got = append(got, r); return 0 }))
		do(e, "GET", "/http-error")
		do(e, "GET", "/plain-error")
		do(e, "GET", "/")
		want := []guard.Result{{Status: 503, Bytes: int64(len(`{"message":"down"}` + "\n"))}, {Status: 502}, {Status: 200, Bytes: 2}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("settled with %v, want %v", got, want)
		}
	})
	t.Run("without settling on the status, the handler's error goes out unchanged", func(t *testing.T) {
		e, seen := newEcho(t)
		run(t, e, []step{{target: "/plain-error", status: 502, rateLimit: `"m";r=0;t=60`}})
		if len(*seen) != 1 || !errors.Is((*seen)[0], errTeapot) {
			t.Errorf("the outer middleware saw %v, want [teapot]", *seen)
		}
	})
}

// A request may carry a context of a type == cannot compare (a struct
// value with a slice field): the middleware passes it on, and does not
// panic comparing it with the context it hands the handler.
func TestAnUncomparableRequestContextPassesThrough(t *testing.T) {
	for _, reported := range []bool{false, true} {
		var opts []echolimit.Option
		if reported {
			opts = append(opts, echolimit.WithReportedCost())
		}
		e := echo.New()
		e.Use(echolimit.New(newLimiter(t, nil, fixed(100, "m")), opts...))
		e.GET("/", func(c echo.Context) error {
			if c.Request().Context().Value(guardtest.UncomparableKey{}) != "seen" {
				t.Error("the handler's context lost the request's")
			}
			if reported && !echolimit.ReportCost(c, 10) {
				t.Error("ReportCost found no slot in the handler's context")
			}
			return c.NoContent(http.StatusOK)
		})
		req := httptest.NewRequest("GET", "/", nil)
		rec := doReq(e, req.WithContext(guardtest.UncomparableContext(req.Context())))
		if got := rec.Header().Get("RateLimit"); rec.Code != http.StatusOK || got != `"m";r=99;t=60` {
			t.Errorf("reported cost %v: status %d, RateLimit %q; want 200, r=99", reported, rec.Code, got)
		}
	}
}

func TestReportedCost(t *testing.T) {
	for name, report := range map[string]func(c echo.Context) bool{
		"echolimit.ReportCost":   func(c echo.Context) bool { return echolimit.ReportCost(c, 40) },
		"guard.ReportCost":       func(c echo.Context) bool { return guard.ReportCost(c.Request().Context(), 40) },
		"echolimit.AddCost":      func(c echo.Context) bool { return echolimit.AddCost(c, 30) && echolimit.AddCost(c, 10) },
		"a wrapped http.Handler": nil,
	} {
		t.Run(name, func(t *testing.T) {
			e := echo.New()
			e.Use(echolimit.New(newLimiter(t, nil, fixed(100, "m")), echolimit.WithReportedCost()))
			e.GET("/", func(c echo.Context) error {
				if report != nil && !report(c) {
					t.Error("the handler's context has no cost slot")
				}
				return c.NoContent(http.StatusNoContent)
			})
			e.GET("/wrapped", echo.WrapHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				guard.ReportCost(r.Context(), 40)
			})))
			target := "/"
			if report == nil {
				target = "/wrapped"
			}
			do(e, "GET", target)
			run(t, e, []step{{target: "/", status: 204, rateLimit: `"m";r=59;t=60`}}) // 100 − 40 − 1
		})
	}
	t.Run("without WithReportedCost, reporting does nothing", func(t *testing.T) {
		e := echo.New()
		e.Use(echolimit.New(newLimiter(t, nil, fixed(100, "m"))))
		e.GET("/", func(c echo.Context) error {
			if echolimit.ReportCost(c, 40) {
				t.Error("ReportCost found a slot without WithReportedCost")
			}
			return nil
		})
		run(t, e, []step{{target: "/", status: 200, rateLimit: `"m";r=99;t=60`}, {target: "/", status: 200, rateLimit: `"m";r=98;t=60`}})
	})
}

func TestLeakyBucketWaitIsCancelledWithTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, nil, core.Per(1, time.Second).WithAlgorithm(core.LeakyBucket).WithBurst(10).Named("leaky"))
		e := echo.New()
		e.Use(echolimit.New(lim, echolimit.WithMaxDelay(time.Minute)))
		e.GET("/", ok)
		do(e, "GET", "/") // the next one waits 1s
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(300 * time.Millisecond)
			cancel()
		}()
		start := time.Now()
		rec := doReq(e, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
		if rec.Code != 503 || time.Since(start) != 300*time.Millisecond || strings.Contains(rec.Body.String(), "cancel") {
			t.Errorf("cancelled wait: %d %s after %v; want 503 with a generic body after 300ms", rec.Code, rec.Body, time.Since(start))
		}
		start = time.Now()
		if rec := do(e, "GET", "/"); rec.Code != 200 || time.Since(start) != time.Second {
			t.Errorf("next request: %d after %v; want 200 after 1s (the cancelled one's turn, the last in the queue, given back)", rec.Code, time.Since(start))
		}
	})
}

func TestErrorTextNeverLeaks(t *testing.T) {
	errSecret := errors.New("secret: db at 10.0.0.7")
	tests := []struct {
		name  string
		store core.Store
		opts  []echolimit.Option
		req   func() *http.Request
		want  int
	}{
		{"a failing store", guardtest.FailingStore{}, nil, nil, 503},
		{"a hanging store past the request's deadline", guardtest.HangingStore{}, nil, func() *http.Request {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			_ = cancel // ends with the deadline
			return httptest.NewRequest("GET", "/", nil).WithContext(ctx)
		}, 503},
		{"a failing key function", nil, []echolimit.Option{echolimit.WithKeyFunc(func(echo.Context) (string, error) { return "", errSecret })}, nil, 400},
		{"a failing cost function", nil, []echolimit.Option{echolimit.WithCostFunc(func(echo.Context) (int64, error) { return 0, errSecret })}, nil, 400},
		{"an unparsable peer address", nil, nil, func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "secret\x00"
			return r
		}, 500},
		{"an error handler returning an *echo.HTTPError", guardtest.FailingStore{}, []echolimit.Option{
			echolimit.WithErrorHandler(func(c echo.Context, err error) error { return echo.NewHTTPError(guard.ErrorStatus(err)) }),
		}, nil, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := echo.New()
			e.Debug = true // echo's error handler would send a plain error's text
			e.Use(echolimit.New(newLimiter(t, tt.store, fixed(1, "m")), tt.opts...))
			e.GET("/", func(c echo.Context) error { t.Error("handler ran"); return nil })
			r := httptest.NewRequest("GET", "/", nil)
			if tt.req != nil {
				r = tt.req()
			}
			rec := doReq(e, r)
			if rec.Code != tt.want || strings.Contains(rec.Body.String(), "secret") || strings.Contains(rec.Body.String(), "deadline") {
				t.Errorf("status %d, body %s; want %d and a generic body", rec.Code, rec.Body, tt.want)
			}
		})
	}
}

func TestNativeHandlersAndHooks(t *testing.T) {
	var denied, errored []string
	e := echo.New()
	e.Use(auth, echolimit.New(newLimiter(t, nil, fixed(1, "m")),
		echolimit.WithKey(echolimit.Value("user")),
		echolimit.WithDeniedHandler(func(c echo.Context, d *guard.Denial) error {
			return echo.NewHTTPError(http.StatusTooManyRequests, "slow down, "+c.Get("user").(string))
		}),
		echolimit.WithErrorHandler(func(c echo.Context, err error) error {
			return c.JSON(http.StatusUnauthorized, map[string]string{"error": "who are you?"})
		}),
		echolimit.WithOnDenied(func(c echo.Context, d *guard.Denial) { denied = append(denied, c.Get("user").(string)) }),
		echolimit.WithOnError(func(c echo.Context, err error) { errored = append(errored, c.Request().URL.Path) }),
	))
	e.GET("/*", ok)
	tests := []struct {
		user       string
		want       int
		body       string
		retryAfter string
	}{
		{"alice", 200, "ok", ""},
		{"alice", 429, `{"message":"slow down, alice"}` + "\n", "60"},
		{"", 401, `{"error":"who are you?"}` + "\n", ""},
	}
	for i, tt := range tests {
		r := httptest.NewRequest("GET", "/x", nil)
		if tt.user != "" {
			r.Header.Set("X-User", tt.user)
		}
		rec := doReq(e, r)
		if rec.Code != tt.want || rec.Body.String() != tt.body || rec.Header().Get("Retry-After") != tt.retryAfter {
			t.Errorf("request %d = %d %q Retry-After %q, want %d %q %q",
				i, rec.Code, rec.Body, rec.Header().Get("Retry-After"), tt.want, tt.body, tt.retryAfter)
		}
	}
	if fmt.Sprint(denied, errored) != "[alice] [/x]" {
		t.Errorf("hooks saw denials %v and errors %v; want [alice] and [/x]", denied, errored)
	}
}

func TestConfigFields(t *testing.T) {
	e := echo.New()
	e.Use(echolimit.NewWithConfig(echolimit.Config{
		Limiter:  newLimiter(t, nil, fixed(10, "m")),
		KeyFunc:  func(c echo.Context) (string, error) { return c.QueryParam("k"), nil },
		Cost:     3,
		CostFunc: nil,
		Headers:  guard.HeadersDraft06,
		DryRun:   true,
	}))
	e.GET("/", ok)
	for i, want := range []string{"7", "4", "1", "1", "1"} {
		rec := do(e, "GET", "/?k=a")
		if rec.Code != 200 || rec.Header().Get("RateLimit-Remaining") != want {
			t.Errorf("request %d = %d RateLimit-Remaining %q, want 200 %s (cost 3, draft-06, dry run: denials pass uncounted)",
				i, rec.Code, rec.Header().Get("RateLimit-Remaining"), want)
		}
	}
}

func TestPanicIsRefundedAndRecoveredByEcho(t *testing.T) {
	e := echo.New()
	e.Use(middleware.Recover(), echolimit.New(newLimiter(t, nil, fixed(1, "m")), echolimit.WithRefundOn(guard.ServerErrors)))
	e.GET("/panic", func(c echo.Context) error { panic("boom") })
	e.GET("/", ok)
	run(t, e, []step{
		{target: "/panic", status: 500, rateLimit: `"m";r=0;t=60`},
		{target: "/", status: 200, rateLimit: `"m";r=0;t=60`}, // the panicking request was refunded
	})
}

func TestPanicsInConfiguredFunctionsLeaveNoCharge(t *testing.T) {
	const boom = guardtest.Boom
	when := func(c echo.Context, trigger string) bool {
		return c.Request().Header.Get(guardtest.TriggerHeader) == trigger
	}
	tests := []struct {
		name, trigger string
		opts          []echolimit.Option
	}{
		{"a later rule's key function", "panic", nil},
		{"the cost function", "panic", []echolimit.Option{echolimit.WithCostFunc(func(c echo.Context) (int64, error) {
			if when(c, "panic") {
				panic(boom)
			}
			return 1, nil
		})}},
		{"the skipper", "panic", []echolimit.Option{echolimit.WithSkipper(func(c echo.Context) bool {
			if when(c, "panic") {
				panic(boom)
			}
			return false
		})}},
		{"the denied handler", "deny", []echolimit.Option{echolimit.WithDeniedHandler(func(echo.Context, *guard.Denial) error { panic(boom) })}},
		{"the OnDenied hook", "deny", []echolimit.Option{echolimit.WithOnDenied(func(echo.Context, *guard.Denial) { panic(boom) })}},
		{"the error handler", "fail", []echolimit.Option{echolimit.WithErrorHandler(func(echo.Context, error) error { panic(boom) })}},
		{"the OnError hook", "fail", []echolimit.Option{echolimit.WithOnError(func(echo.Context, error) { panic(boom) })}},
	}
	for _, tt := range tests {
		t.Run("a panic in "+tt.name+" reaches echo's Recover and leaves no charge", func(t *testing.T) {
			var recovered []string
			e := echo.New()
			e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{LogErrorFunc: func(_ echo.Context, err error, _ []byte) error {
				recovered = append(recovered, err.Error())
				return err
			}}))
			e.Use(echolimit.New(newLimiter(t, nil, fixed(1, "per-ip")), append(tt.opts, guardtest.TriggerRule(t))...))
			e.GET("/", ok)
			for i := range 3 {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set(guardtest.TriggerHeader, tt.trigger)
				if got := doReq(e, r).Code; got != 500 {
					t.Errorf("request %d with %s = %d, want 500 from echo's Recover", i, tt.trigger, got)
				}
			}
			if len(recovered) != 3 || recovered[0] != boom {
				t.Errorf("echo recovered %q, want the panic %q three times", recovered, boom)
			}
			if got := do(e, "GET", "/").Code; got != 200 {
				t.Errorf("the next request = %d, want 200: the panicking ones left no charge", got)
			}
		})
	}
}
