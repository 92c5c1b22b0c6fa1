package fiberlimit_test

import (
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"

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
