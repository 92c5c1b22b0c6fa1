package echolimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/echolimit"
	"github.com/tollgate/tollgate/nethttp"
)

// A route's own middleware behind the app-wide one appends its policies
// to the app-wide lists: the client sees both.
func TestStackedMiddlewaresShowEveryPolicy(t *testing.T) {
	e := echo.New()
	e.Use(echolimit.New(newLimiter(t, nil, fixed(5, "app"))))
	e.GET("/search", func(c echo.Context) error { return c.NoContent(http.StatusOK) }, echolimit.New(newLimiter(t, nil, fixed(10, "search")), echolimit.WithCost(5)))
	var rec *httptest.ResponseRecorder
	for range 2 {
		rec = httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest("GET", "/search", nil))
	}
	if got, want := rec.Header().Get("RateLimit-Policy"), `"app";q=5;w=60, "search";q=10;w=60`; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	if got, want := rec.Header().Get("RateLimit"), `"app";r=3;t=60, "search";r=0;t=60`; got != want {
		t.Errorf("RateLimit = %q, want %q", got, want)
	}
}

// peek returns key's remaining units under lim.
func peek(t *testing.T, lim *core.Limiter, key string) int64 {
	t.Helper()
	d, err := lim.Peek(context.Background(), key)
	if err != nil {
		t.Fatalf("Peek(%q): %v", key, err)
	}
	return d.Remaining
}

// An echo server mounted in a nethttp middleware joins its chain: a
// route's echo middleware that denies leaves no charge in the nethttp
// one, and the headers list both policies.
func TestAnEchoServerInsideANetHTTPMiddleware(t *testing.T) {
	app := newLimiter(t, nil, fixed(5, "app"))
	e := echo.New()
	e.GET("/search", func(c echo.Context) error { return c.NoContent(http.StatusOK) }, echolimit.New(newLimiter(t, nil, fixed(1, "search"))))
	h := nethttp.New(app)(e)
	for i, want := range []int{200, 429, 429} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/search", nil))
		if rec.Code != want || rec.Header().Get("RateLimit") != `"app";r=4;t=60, "search";r=0;t=60` {
			t.Errorf("request %d: %d %q, want %d and the app-wide item untouched by denials", i, rec.Code, rec.Header().Get("RateLimit"), want)
		}
	}
	if got := peek(t, app, "192.0.2.1"); got != 4 {
		t.Errorf("app remaining = %d, want 4: only the request that passed counts", got)
	}
}

// A nethttp middleware in an http.Handler mounted with echo.WrapHandler
// joins the chain of the echo middleware around it; the echo chain's
// writer is restored once it returns.
func TestANetHTTPMiddlewareInsideEcho(t *testing.T) {
	app := newLimiter(t, nil, fixed(5, "app"))
	search := nethttp.New(newLimiter(t, nil, fixed(1, "search")))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	e := echo.New()
	var writer http.ResponseWriter
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			writer = c.Response().Writer
			err := next(c)
			if c.Response().Writer != writer {
				t.Errorf("c.Response().Writer is %T after the middleware, want %T", c.Response().Writer, writer)
			}
			return err
		}
	})
	e.Use(echolimit.New(app))
	e.GET("/search", echo.WrapHandler(search))
	for i, want := range []int{200, 429, 429} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest("GET", "/search", nil))
		if rec.Code != want {
			t.Errorf("request %d: %d, want %d", i, rec.Code, want)
		}
	}
	if got := peek(t, app, "192.0.2.1"); got != 4 {
		t.Errorf("app remaining = %d, want 4: only the request that passed counts", got)
	}
}

// echo routes before its middleware runs: when the app-wide middleware
// denies, its 429 lists the route's policies it learned.
func TestAnAppWideDenialListsTheRoutesPolicies(t *testing.T) {
	e := echo.New()
	e.Use(echolimit.New(newLimiter(t, nil, fixed(2, "app"))))
	ok := func(c echo.Context) error { return c.NoContent(http.StatusOK) }
	e.GET("/search", ok, echolimit.New(newLimiter(t, nil, fixed(10, "search"))))
	e.GET("/hello", ok)
	const both = `"app";q=2;w=60, "search";q=10;w=60`
	for i, s := range []struct {
		path, policy string
		status       int
	}{{"/search", both, 200}, {"/hello", `"app";q=2;w=60`, 200}, {"/search", both, 429}, {"/hello", `"app";q=2;w=60`, 429}} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest("GET", s.path, nil))
		if rec.Code != s.status || rec.Header().Get("RateLimit-Policy") != s.policy {
			t.Errorf("step %d GET %s: %d %q, want %d %q", i, s.path, rec.Code, rec.Header().Get("RateLimit-Policy"), s.status, s.policy)
		}
	}
}

// keeper replaces c.Response().Writer with a writer of its own over the
// one it found, and leaves it there, as a compressing middleware does.
type keeper struct{ http.ResponseWriter }

// A gate whose writer a middleware further in kept (under a writer of its
// own, never put back) is not reused while its response may still be
// written: an outer middleware that writes after the rest of the chain
// returned, once another request has been served in between, still
// writes to its own response (a gate reused there would have been
// emptied: the late write would panic, or reach the other response).
func TestAKeptWriterIsNotReused(t *testing.T) {
	e := echo.New()
	var other *httptest.ResponseRecorder
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			if c.Path() == "/" {
				other = doReq(e, httptest.NewRequest(http.MethodGet, "/other", nil))
				_, _ = c.Response().Writer.Write([]byte("-late"))
			}
			return err
		}
	})
	e.Use(echolimit.New(newLimiter(t, nil, fixed(100, "m"))))
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Path() == "/" {
				c.Response().Writer = keeper{c.Response().Writer}
			}
			return next(c)
		}
	})
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "first") })
	e.GET("/other", func(c echo.Context) error { return c.String(http.StatusOK, "other") })
	first := doReq(e, httptest.NewRequest(http.MethodGet, "/", nil))
	if other == nil || first.Body.String() != "first-late" || other.Body.String() != "other" {
		t.Fatalf("first response %q, the one served in between %v; want %q and %q", first.Body.String(), other, "first-late", "other")
	}
}

// The same when a middleware further in puts a Response of its own over
// the gate's writer (c.SetResponse) and leaves it: echo's error handler,
// which answers the handler's error once the middlewares have returned,
// writes through it, to the request's own response.
func TestAResponseKeptFurtherInIsNotReused(t *testing.T) {
	e := echo.New()
	e.Use(echolimit.New(newLimiter(t, nil, fixed(100, "m"))))
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.SetResponse(echo.NewResponse(keeper{c.Response().Writer}, e))
			return next(c)
		}
	})
	e.GET("/", func(c echo.Context) error { return errors.New("boom") })
	for i := range 3 {
		rec := do(e, http.MethodGet, "/")
		if rec.Code != http.StatusInternalServerError || rec.Header().Get("RateLimit") == "" {
			t.Fatalf("request %d: %d, RateLimit %q; want 500 with the headers", i, rec.Code, rec.Header().Get("RateLimit"))
		}
	}
}
