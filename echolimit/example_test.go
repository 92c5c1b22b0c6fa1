package echolimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/echolimit"
	"github.com/tollgate/tollgate/guard"
)

// exampleLimiter returns a limiter on a memory store with a fixed clock,
// and a function that closes the store.
func exampleLimiter(n int64, name string) (*core.Limiter, func() error) {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	store := memstore.New(memstore.WithClock(clock))
	lim, err := core.New(store, core.WithClock(clock), core.PerMinute(n).WithAlgorithm(core.FixedWindow).Named(name))
	if err != nil {
		panic(err)
	}
	return lim, store.Close
}

func send(e *echo.Echo, method, target string, header ...string) {
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, r)
	fmt.Println(strings.TrimSpace(fmt.Sprint(rec.Code, " ", rec.Header().Get("RateLimit"), " ", rec.Header().Get("Retry-After"))))
}

func Example() {
	lim, closeStore := exampleLimiter(2, "per-minute")
	defer closeStore()

	e := echo.New()
	e.Use(echolimit.New(lim)) // whole app, keyed by the peer address
	e.GET("/hello", func(c echo.Context) error { return c.String(http.StatusOK, "hello") })

	for range 3 {
		send(e, "GET", "/hello")
	}
	// Output:
	// 200 "per-minute";r=1;t=60
	// 200 "per-minute";r=0;t=60
	// 429 "per-minute";r=0;t=60 60
}

func ExampleNew_perRoute() {
	searchLim, closeStore := exampleLimiter(10, "search")
	defer closeStore()

	e := echo.New()
	search := func(c echo.Context) error { return c.String(http.StatusOK, "results") }
	e.POST("/search", search, echolimit.New(searchLim, echolimit.WithCost(5))) // a costly endpoint

	for range 3 {
		send(e, "POST", "/search")
	}
	// Output:
	// 200 "search";r=5;t=60
	// 200 "search";r=0;t=60
	// 429 "search";r=0;t=60 60
}

func ExampleValue() {
	lim, closeStore := exampleLimiter(1, "per-user")
	defer closeStore()

	e := echo.New()
	auth := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set("user", c.Request().Header.Get("X-User")) // a real one checks a token
			return next(c)
		}
	}
	api := e.Group("/api", auth, echolimit.New(lim, echolimit.WithKey(echolimit.Value("user"))))
	api.GET("/me", func(c echo.Context) error { return c.String(http.StatusOK, c.Get("user").(string)) })

	send(e, "GET", "/api/me", "X-User", "alice")
	send(e, "GET", "/api/me", "X-User", "alice")
	send(e, "GET", "/api/me", "X-User", "bob")
	send(e, "GET", "/api/me") // no user: 400
	// Output:
	// 200 "per-user";r=0;t=60
	// 429 "per-user";r=0;t=60 60
	// 200 "per-user";r=0;t=60
	// 400
}

func ExampleNewWithConfig() {
	lim, closeStore := exampleLimiter(100, "tokens")
	defer closeStore()

	e := echo.New()
	e.Use(echolimit.NewWithConfig(echolimit.Config{
		Skipper: func(c echo.Context) bool { return c.Path() == "/health" },
		Limiter: lim,
		Options: []echolimit.Option{echolimit.WithReportedCost()},
	}))
	e.GET("/health", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	e.POST("/complete", func(c echo.Context) error {
		echolimit.ReportCost(c, 42) // e.g. the tokens the answer took
		return c.String(http.StatusOK, "...")
	})

	send(e, "GET", "/health")
	send(e, "POST", "/complete") // admitted at 1, settled at 42
	send(e, "POST", "/complete")
	// Output:
	// 204
	// 200 "tokens";r=99;t=60
	// 200 "tokens";r=57;t=60
}

func ExampleWithDeniedHandler() {
	lim, closeStore := exampleLimiter(1, "per-minute")
	defer closeStore()

	e := echo.New()
	e.Use(echolimit.New(lim, echolimit.WithDeniedHandler(func(c echo.Context, d *guard.Denial) error {
		// answered by e.HTTPErrorHandler; the RateLimit headers are already set
		return echo.NewHTTPError(http.StatusTooManyRequests, "slow down")
	})))
	e.GET("/", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })

	send(e, "GET", "/")
	send(e, "GET", "/")
	// Output:
	// 204 "per-minute";r=0;t=60
	// 429 "per-minute";r=0;t=60 60
}
