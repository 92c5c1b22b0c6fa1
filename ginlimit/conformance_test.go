package ginlimit_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/ginlimit"
	"github.com/tollgate/tollgate/guard/guardtest"
)

// TestConformance runs the shared table: the same statuses, headers and
// bodies as every other adapter. Requests outside the group reach App
// through NoRoute, so every method and path goes through the app-wide
// middleware. gin knows the route before any middleware runs (FullPath),
// so the table runs with RunKnownRoutes.
func TestConformance(t *testing.T) { guardtest.RunKnownRoutes(t, build) }

// TestConformanceLeased runs the table with leases on (package lease).
func TestConformanceLeased(t *testing.T) { guardtest.RunLeased(t, build, true) }

// build mounts cfg's layers with r.Use, the group's and the route's.
func build(t *testing.T, cfg guardtest.Config) http.Handler {
	r := gin.New()
	r.Use(handlers(cfg.In(guardtest.AppWide))...)
	mountGroup(r, cfg)
	r.NoRoute(gin.WrapH(cfg.App))
	return r
}

// TestConformanceOnARoute runs the table again with the app-wide
// middleware on routes rather than r.Use: per-route decoration behaves
// the same.
func TestConformanceOnARoute(t *testing.T) {
	guardtest.RunKnownRoutes(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
		r := gin.New()
		app := handlers(cfg.In(guardtest.AppWide))
		for _, path := range []string{"/", "/health"} {
			r.Any(path, append(app, gin.WrapH(cfg.App))...)
		}
		mountGroup(r.Group("", app...), cfg)
		return r
	})
}

// TestInFlight holds concurrency limits to the requests in the handler,
// panics included.
func TestInFlight(t *testing.T) { guardtest.RunInFlight(t, appWide) }

// TestSlowRefund refunds a request that fails after a window's end to the
// window it was taken from.
func TestSlowRefund(t *testing.T) { guardtest.RunSlowRefund(t, appWide) }

// appWide mounts cfg's app-wide layers with r.Use, and the app.
func appWide(t *testing.T, cfg guardtest.Config) http.Handler {
	r := gin.New()
	r.Use(handlers(cfg.In(guardtest.AppWide))...)
	r.NoRoute(gin.WrapH(cfg.App))
	return r
}

// mountGroup mounts the group and its routes of a stacked case on r.
func mountGroup(r gin.IRouter, cfg guardtest.Config) {
	g := r.Group(guardtest.GroupPrefix, handlers(cfg.In(guardtest.Grouped))...)
	g.Any(guardtest.RoutePath[len(guardtest.GroupPrefix):], append(handlers(cfg.In(guardtest.OnRoute)), gin.WrapH(cfg.App))...)
	g.Any(guardtest.GroupPath[len(guardtest.GroupPrefix):], gin.WrapH(cfg.App))
}

// handlers returns the middlewares of layers, outermost first.
func handlers(layers []guardtest.Layer) []gin.HandlerFunc {
	hs := make([]gin.HandlerFunc, 0, len(layers)+1)
	for _, l := range layers {
		hs = append(hs, ginlimit.New(l.Limiter, l.Options...))
	}
	return hs
}

// TestAdaptive holds the adaptive limit to the requests in the handler:
// shedding, priorities, panics.
func TestAdaptive(t *testing.T) { guardtest.RunAdaptive(t, appWide) }
