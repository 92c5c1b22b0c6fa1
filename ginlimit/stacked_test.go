package ginlimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/ginlimit"
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
