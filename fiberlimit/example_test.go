package fiberlimit_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/fiberlimit"
)

func Example() {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, err := core.New(store, core.WithClock(clock), core.PerMinute(2).WithAlgorithm(core.FixedWindow).Named("per-minute"))
	if err != nil {
		panic(err)
	}

	app := fiber.New()
	app.Use(fiberlimit.New(lim)) // whole app, keyed by the peer's IP
	app.Get("/hello", func(c *fiber.Ctx) error { return c.SendString("hello") })

	for range 3 {
		resp, err := app.Test(httptest.NewRequest("GET", "/hello", nil))
		if err != nil {
			panic(err)
		}
		fmt.Print(resp.StatusCode, " ", resp.Header.Get("RateLimit"))
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			fmt.Print(" retry after ", ra, "s")
		}
		fmt.Println()
	}
	// Output:
	// 200 "per-minute";r=1;t=60
	// 200 "per-minute";r=0;t=60
	// 429 "per-minute";r=0;t=60 retry after 60s
}

func ExampleNew_perRoute() {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	searchLim, _ := core.New(store, core.WithClock(clock), core.PerMinute(10).WithAlgorithm(core.FixedWindow).Named("search"))

	app := fiber.New()
	search := func(c *fiber.Ctx) error { return c.SendString("results") }
	app.Post("/search", fiberlimit.New(searchLim, fiberlimit.WithCost(5)), search) // a costly endpoint

	for range 3 {
		resp, _ := app.Test(httptest.NewRequest("POST", "/search", nil))
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"))
	}
	// Output:
	// 200 "search";q=10;w=60 "search";r=5;t=60
	// 200 "search";q=10;w=60 "search";r=0;t=60
	// 429 "search";q=10;w=60 "search";r=0;t=60
}

func ExampleLocals() {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, _ := core.New(store, core.WithClock(clock), core.PerMinute(1).WithAlgorithm(core.FixedWindow).Named("per-user"))

	app := fiber.New()
	app.Use(func(c *fiber.Ctx) error { // authentication, say
		if u := c.Get("X-User"); u != "" {
			c.Locals("user", u)
		}
		return c.Next()
	})
	app.Use(fiberlimit.New(lim, fiberlimit.WithKey(fiberlimit.Locals("user"))))
	app.Get("/", func(c *fiber.Ctx) error { return c.SendString("hi") })

	for _, user := range []string{"alice", "alice", "bob", ""} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-User", user)
		resp, _ := app.Test(req)
		fmt.Printf("%q %d\n", user, resp.StatusCode)
	}
	// Output:
	// "alice" 200
	// "alice" 429
	// "bob" 200
	// "" 400
}

func ExampleReportCost() {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, _ := core.New(store, core.WithClock(clock), core.PerMinute(1000).WithAlgorithm(core.FixedWindow).Named("tokens"))

	app := fiber.New()
	app.Post("/complete", fiberlimit.New(lim, fiberlimit.WithReportedCost()), func(c *fiber.Ctx) error {
		fiberlimit.ReportCost(c, 250) // tokens produced, known only now
		return c.SendString("...")
	})

	for range 2 {
		resp, _ := app.Test(httptest.NewRequest("POST", "/complete", nil))
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	// Output:
	// 200 "tokens";r=999;t=60
	// 200 "tokens";r=749;t=60
}
