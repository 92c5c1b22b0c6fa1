package ginlimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/ginlimit"
	"github.com/tollgate/tollgate/keyfuncs"
)

// exampleLimiter returns a limiter on a memory store with a fixed clock,
// so that the outputs below are exact, and the store's Close.
func exampleLimiter(limits ...core.Limit) (*core.Limiter, func() error) {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	opts := []core.Option{core.WithClock(clock)}
	for _, l := range limits {
		opts = append(opts, l)
	}
	store := memstore.New(memstore.WithClock(clock))
	lim, err := core.New(store, opts...)
	if err != nil {
		panic(err)
	}
	return lim, store.Close
}

// send sends a request to r and prints the status and rate-limit headers.
func send(r http.Handler, method, target string, header ...string) {
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	fmt.Println(strings.TrimSpace(fmt.Sprint(rec.Code, " ", rec.Header().Get("RateLimit"), " ", rec.Header().Get("Retry-After"))))
}

// The whole app, keyed by client IP (the connection's peer).
func Example() {
	lim, closeStore := exampleLimiter(core.PerMinute(2).WithAlgorithm(core.FixedWindow).Named("per-minute"))
	defer closeStore()

	r := gin.New()
	r.Use(ginlimit.New(lim))
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello") })

	for range 3 {
		send(r, "GET", "/hello")
	}
	// Output:
	// 200 "per-minute";r=1;t=60
	// 200 "per-minute";r=0;t=60
	// 429 "per-minute";r=0;t=60 60
}

// A costly route with its own limiter: each search costs 5 of 10 units a
// minute. Other routes are not limited.
func ExampleNew_perRoute() {
	searchLim, closeStore := exampleLimiter(core.PerMinute(10).WithAlgorithm(core.FixedWindow).Named("search"))
	defer closeStore()

	r := gin.New()
	r.POST("/search", ginlimit.New(searchLim, ginlimit.WithCost(5)), func(c *gin.Context) {
		c.String(http.StatusOK, "results")
	})
	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "home") })

	for range 3 {
		send(r, "POST", "/search")
	}
	send(r, "GET", "/")
	// Output:
	// 200 "search";r=5;t=60
	// 200 "search";r=0;t=60
	// 429 "search";r=0;t=60 60
	// 200
}

// A limit on a group of routes, which share it.
func ExampleNew_group() {
	lim, closeStore := exampleLimiter(core.PerMinute(2).WithAlgorithm(core.FixedWindow).Named("api"))
	defer closeStore()

	r := gin.New()
	api := r.Group("/api", ginlimit.New(lim))
	api.GET("/users", func(c *gin.Context) { c.JSON(http.StatusOK, []string{"alice"}) })
	api.GET("/orders", func(c *gin.Context) { c.JSON(http.StatusOK, []int{1}) })

	send(r, "GET", "/api/users")
	send(r, "GET", "/api/orders")
	send(r, "GET", "/api/users")
	// Output:
	// 200 "api";r=1;t=60
	// 200 "api";r=0;t=60
	// 429 "api";r=0;t=60 60
}

// A limit per user, where an authentication middleware that runs first
// stored the user with c.Set. A request without a user gets 400: an empty
// key never passes unlimited.
func ExampleWithKeyFunc() {
	lim, closeStore := exampleLimiter(core.PerMinute(1).WithAlgorithm(core.FixedWindow).Named("per-user"))
	defer closeStore()

	auth := func(c *gin.Context) {
		if tok := c.GetHeader("Authorization"); tok != "" {
			c.Set("user", strings.TrimPrefix(tok, "Bearer ")) // verified, in real life
		}
	}
	r := gin.New()
	r.Use(auth, ginlimit.New(lim, ginlimit.WithKeyFunc(func(c *gin.Context) (string, error) {
		return c.GetString("user"), nil
	})))
	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "hi "+c.GetString("user")) })

	send(r, "GET", "/", "Authorization", "Bearer alice")
	send(r, "GET", "/", "Authorization", "Bearer alice")
	send(r, "GET", "/", "Authorization", "Bearer bob")
	send(r, "GET", "/")
	// Output:
	// 200 "per-user";r=0;t=60
	// 429 "per-user";r=0;t=60 60
	// 200 "per-user";r=0;t=60
	// 400
}

// Behind a reverse proxy on the same host, trust it, and only it, for
// X-Forwarded-For. gin's ClientIP and TrustedPlatform are not used.
func ExampleWithKey_trustedProxy() {
	lim, closeStore := exampleLimiter(core.PerMinute(1).WithAlgorithm(core.FixedWindow).Named("per-ip"))
	defer closeStore()

	r := gin.New()
	r.Use(ginlimit.New(lim, ginlimit.WithKey(keyfuncs.IP(keyfuncs.TrustLoopback()))))
	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "ok") })

	for _, xff := range []string{"198.51.100.1", "198.51.100.2", "6.6.6.6, 198.51.100.1"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "127.0.0.1:40000" // the proxy
		req.Header.Set("X-Forwarded-For", xff)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		fmt.Println(xff, "→", rec.Code)
	}
	// Output:
	// 198.51.100.1 → 200
	// 198.51.100.2 → 200
	// 6.6.6.6, 198.51.100.1 → 429
}

// A handler that knows its real cost only once it ran, e.g. tokens
// generated, reports it; the difference from the admitted cost (1) is
// charged after the handler.
func ExampleReportCost() {
	lim, closeStore := exampleLimiter(core.PerMinute(100).WithAlgorithm(core.FixedWindow).Named("tokens"))
	defer closeStore()

	r := gin.New()
	r.POST("/complete", ginlimit.New(lim, ginlimit.WithReportedCost()), func(c *gin.Context) {
		tokens := int64(42) // generated
		ginlimit.ReportCost(c, tokens)
		c.String(http.StatusOK, "…")
	})

	send(r, "POST", "/complete")
	send(r, "POST", "/complete")
	// Output:
	// 200 "tokens";r=99;t=60
	// 200 "tokens";r=57;t=60
}
