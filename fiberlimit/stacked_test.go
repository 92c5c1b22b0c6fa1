package fiberlimit_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/fiberlimit"
)

// A route's own middleware behind the app-wide one appends its policies
// to the app-wide lists: the client sees both.
func TestStackedMiddlewaresShowEveryPolicy(t *testing.T) {
	app := fiber.New()
	app.Use(fiberlimit.New(newLimiter(t, nil, fixed(5, "app"))))
	app.Get("/search", fiberlimit.New(newLimiter(t, nil, fixed(10, "search")), fiberlimit.WithCost(5)), func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	var policy, limit string
	for range 2 {
		resp, err := app.Test(httptest.NewRequest("GET", "/search", nil))
		if err != nil {
			t.Fatal(err)
		}
		policy, limit = resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit")
		resp.Body.Close()
	}
	if want := `"app";q=5;w=60, "search";q=10;w=60`; policy != want {
		t.Errorf("RateLimit-Policy = %q, want %q", policy, want)
	}
	if want := `"app";r=3;t=60, "search";r=0;t=60`; limit != want {
		t.Errorf("RateLimit = %q, want %q", limit, want)
	}
}

// A route's own middlewares know the route: when the outer one denies, its
// 429 lists the inner one's policies it learned. Middleware added with
// app.Use runs before fiber picks the route, and lists its own only. The
// route's denial leaves no charge in either.
func TestStackedMiddlewaresOnAFiberRoute(t *testing.T) {
	app := fiber.New()
	useLim, outerLim := newLimiter(t, nil, fixed(10, "use")), newLimiter(t, nil, fixed(3, "outer"))
	app.Use(fiberlimit.New(useLim))
	app.Get("/search", fiberlimit.New(outerLim), fiberlimit.New(newLimiter(t, nil, fixed(1, "inner"))), ok)
	app.Get("/hello", fiberlimit.New(outerLim), ok)
	const all = `"use";q=10;w=60, "outer";q=3;w=60, "inner";q=1;w=60`
	for i, s := range []struct {
		path, policy string
		status       int
	}{
		{"/search", all, 200},
		{"/search", all, 429}, // inner denies: outer and use are refunded
		{"/hello", `"use";q=10;w=60, "outer";q=3;w=60`, 200},
		{"/hello", `"use";q=10;w=60, "outer";q=3;w=60`, 200},
		{"/search", all, 429}, // outer denies, knowing the route
	} {
		resp := do(app, "GET", s.path)
		if resp.StatusCode() != s.status || string(resp.Header.Peek("RateLimit-Policy")) != s.policy {
			t.Errorf("step %d GET %s: %d %q, want %d %q", i, s.path, resp.StatusCode(), resp.Header.Peek("RateLimit-Policy"), s.status, s.policy)
		}
	}
	for _, c := range []struct {
		lim  *core.Limiter
		want int64
	}{{useLim, 7}, {outerLim, 0}} {
		if d, err := c.lim.Peek(context.Background(), "192.0.2.1"); err != nil || d.Remaining != c.want {
			t.Errorf("Peek(%s) = %d, %v; want %d: only the requests that passed count", c.lim.Name(), d.Remaining, err, c.want)
		}
	}
}

// The chain each request carries is its own, under concurrent requests
// (run with -race): every request is counted once.
func TestConcurrentRequestsHaveTheirOwnChain(t *testing.T) {
	app := fiber.New()
	lim := newLimiter(t, nil, fixed(1000, "m"))
	app.Use(fiberlimit.New(lim), fiberlimit.New(lim))
	app.Get("/", ok)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got := do(app, "GET", "/").StatusCode(); got != 200 {
					t.Errorf("status %d, want 200", got)
				}
			}
		})
	}
	wg.Wait()
	if d, err := lim.Peek(context.Background(), "192.0.2.1"); err != nil || d.Remaining != 600 {
		t.Errorf("Peek = %d, %v; want 600: 400 requests, each counted once", d.Remaining, err)
	}
}
