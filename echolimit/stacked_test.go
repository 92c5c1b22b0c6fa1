package echolimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/echolimit"
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
