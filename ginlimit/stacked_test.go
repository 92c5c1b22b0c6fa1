package ginlimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/ginlimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/nethttp"
)

// A route's own middleware behind the app-wide one appends its policies
// to the app-wide lists: the client sees both.
func TestStackedMiddlewaresShowEveryPolicy(t *testing.T) {
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.Use(ginlimit.New(newLimiter(t, nil, fixed(5, "app"))))
	r.GET("/search", ginlimit.New(newLimiter(t, nil, fixed(10, "search")), ginlimit.WithCost(5)), func(c *gin.Context) { c.Status(http.StatusOK) })
	var rec *httptest.ResponseRecorder
	for range 2 {
		rec = httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", "/search", nil))
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

// A gin engine mounted in a nethttp middleware joins its chain: a route's
// gin middleware that denies leaves no charge in the nethttp one, and the
// headers list both policies.
func TestAGinEngineInsideANetHTTPMiddleware(t *testing.T) {
	gin.SetMode(gin.TestMode)
	app := newLimiter(t, nil, fixed(5, "app"))
	r := gin.New()
	r.GET("/search", ginlimit.New(newLimiter(t, nil, fixed(1, "search"))), func(c *gin.Context) { c.Status(http.StatusOK) })
	h := nethttp.New(app)(r)
	for i, want := range []struct {
		status    int
		rateLimit string
	}{
		{200, `"app";r=4;t=60, "search";r=0;t=60`},
		{429, `"app";r=4;t=60, "search";r=0;t=60`},
		{429, `"app";r=4;t=60, "search";r=0;t=60`},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/search", nil))
		if rec.Code != want.status || rec.Header().Get("RateLimit") != want.rateLimit ||
			rec.Header().Get("RateLimit-Policy") != `"app";q=5;w=60, "search";q=1;w=60` {
			t.Errorf("request %d: %d %q %q, want %d %q and both policies", i, rec.Code, rec.Header().Get("RateLimit"),
				rec.Header().Get("RateLimit-Policy"), want.status, want.rateLimit)
		}
	}
	if got := peek(t, app, "192.0.2.1"); got != 4 {
		t.Errorf("app remaining = %d, want 4: only the request that passed counts", got)
	}
}

// A nethttp middleware in an http.Handler mounted with gin.WrapH joins the
// chain of the gin middleware around it.
func TestANetHTTPMiddlewareInsideGin(t *testing.T) {
	gin.SetMode(gin.TestMode)
	app := newLimiter(t, nil, fixed(5, "app"))
	search := nethttp.New(newLimiter(t, nil, fixed(1, "search")))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := gin.New()
	r.Use(ginlimit.New(app))
	r.GET("/search", gin.WrapH(search))
	for i, want := range []int{200, 429, 429} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", "/search", nil))
		if rec.Code != want {
			t.Errorf("request %d: %d, want %d", i, rec.Code, want)
		}
	}
	if got := peek(t, app, "192.0.2.1"); got != 4 {
		t.Errorf("app remaining = %d, want 4: only the request that passed counts", got)
	}
}

// gin knows the route before its middleware runs: when the app-wide
// middleware denies, its 429 lists the route's policies it learned.
func TestAnAppWideDenialListsTheRoutesPolicies(t *testing.T) {
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.Use(ginlimit.New(newLimiter(t, nil, fixed(2, "app"))))
	r.GET("/search", ginlimit.New(newLimiter(t, nil, fixed(10, "search"))), func(c *gin.Context) { c.Status(http.StatusOK) })
	r.GET("/hello", func(c *gin.Context) { c.Status(http.StatusOK) })
	const both = `"app";q=2;w=60, "search";q=10;w=60`
	for i, s := range []struct {
		path, policy string
		status       int
	}{{"/search", both, 200}, {"/hello", `"app";q=2;w=60`, 200}, {"/search", both, 429}, {"/hello", `"app";q=2;w=60`, 429}} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", s.path, nil))
		if rec.Code != s.status || rec.Header().Get("RateLimit-Policy") != s.policy {
			t.Errorf("step %d GET %s: %d %q, want %d %q", i, s.path, rec.Code, rec.Header().Get("RateLimit-Policy"), s.status, s.policy)
		}
	}
}

// The middleware carries the chain in c.Writer while gin's chain runs
// further in, and gives the writer back when it returns.
func TestCWriterIsRestored(t *testing.T) {
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.Use(func(c *gin.Context) {
		before := c.Writer
		c.Next()
		if c.Writer != before {
			t.Errorf("c.Writer is %T after the middleware, want %T", c.Writer, before)
		}
	})
	r.Use(ginlimit.New(newLimiter(t, nil, fixed(5, "app"))))
	r.GET("/", func(c *gin.Context) {
		if guard.FindChain(c.Writer) == nil {
			t.Error("the handler's c.Writer carries no chain")
		}
		c.Status(http.StatusOK)
	})
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
}
