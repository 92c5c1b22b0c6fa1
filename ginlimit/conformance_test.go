package ginlimit_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/ginlimit"
	"github.com/tollgate/tollgate/guard/guardtest"
)

// TestConformance runs the shared table: the same statuses, headers and
// bodies as every other adapter. Requests reach App through NoRoute, so
// every method and path goes through the app-wide middleware.
func TestConformance(t *testing.T) {
	guardtest.Run(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
		r := gin.New()
		r.Use(ginlimit.New(cfg.Limiter, cfg.Options...))
		r.NoRoute(gin.WrapH(cfg.App))
		return r
	})
}

// TestConformanceOnARoute runs the table again with the middleware on a
// route rather than app-wide: per-route decoration behaves the same.
func TestConformanceOnARoute(t *testing.T) {
	guardtest.Run(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
		r := gin.New()
		mw := ginlimit.New(cfg.Limiter, cfg.Options...)
		h := gin.WrapH(cfg.App)
		for _, path := range []string{"/", "/health"} {
			r.Any(path, mw, h)
		}
		return r
	})
}
