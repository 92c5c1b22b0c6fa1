package echolimit_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/echolimit"
	"github.com/tollgate/tollgate/guard/guardtest"
)

// TestConformance runs the shared table with the app-wide middleware
// mounted with e.Use. echo routes before its middleware runs (c.Path()),
// so the table runs with RunKnownRoutes.
func TestConformance(t *testing.T) { guardtest.RunKnownRoutes(t, build) }

// TestConformanceLeased runs the table with leases on (package lease).
func TestConformanceLeased(t *testing.T) { guardtest.RunLeased(t, build, true) }

// build mounts cfg's layers with e.Use, the group's and the route's.
func build(t *testing.T, cfg guardtest.Config) http.Handler {
	e := echo.New()
	e.Use(middlewares(cfg.In(guardtest.AppWide), nil)...)
	mountGroup(e, cfg, nil)
	e.Any("/*", echo.WrapHandler(cfg.App))
	return e
}

// TestInFlight holds concurrency limits to the requests in the handler,
// panics included.
func TestInFlight(t *testing.T) { guardtest.RunInFlight(t, appWide) }

// TestSlowRefund refunds a request that fails after a window's end to the
// window it was taken from.
func TestSlowRefund(t *testing.T) { guardtest.RunSlowRefund(t, appWide) }

// appWide mounts cfg's app-wide layers with e.Use, and the app.
func appWide(t *testing.T, cfg guardtest.Config) http.Handler {
	e := echo.New()
	e.Use(middlewares(cfg.In(guardtest.AppWide), nil)...)
	e.Any("/*", echo.WrapHandler(cfg.App))
	return e
}

// TestConformanceWithConfig runs the table through NewWithConfig, as
// route middleware, with the guard options passed in Config.Options.
func TestConformanceWithConfig(t *testing.T) {
	guardtest.RunKnownRoutes(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
		e := echo.New()
		withConfig := func(l guardtest.Layer) echo.MiddlewareFunc {
			return echolimit.NewWithConfig(echolimit.Config{Limiter: l.Limiter, Options: l.Options})
		}
		app := middlewares(cfg.In(guardtest.AppWide), withConfig)
		e.Any("/*", echo.WrapHandler(cfg.App), app...)
		mountGroup(e, cfg, app)
		return e
	})
}

// mountGroup mounts the group and its routes of a stacked case on e,
// behind outer.
func mountGroup(e *echo.Echo, cfg guardtest.Config, outer []echo.MiddlewareFunc) {
	g := e.Group(guardtest.GroupPrefix, append(outer, middlewares(cfg.In(guardtest.Grouped), nil)...)...)
	g.Any(guardtest.RoutePath[len(guardtest.GroupPrefix):], echo.WrapHandler(cfg.App), middlewares(cfg.In(guardtest.OnRoute), nil)...)
	g.Any(guardtest.GroupPath[len(guardtest.GroupPrefix):], echo.WrapHandler(cfg.App))
}

// middlewares returns the middlewares of layers, outermost first, built by
// mk (echolimit.New by default).
func middlewares(layers []guardtest.Layer, mk func(guardtest.Layer) echo.MiddlewareFunc) []echo.MiddlewareFunc {
	if mk == nil {
		mk = func(l guardtest.Layer) echo.MiddlewareFunc { return echolimit.New(l.Limiter, l.Options...) }
	}
	ms := make([]echo.MiddlewareFunc, 0, len(layers))
	for _, l := range layers {
		ms = append(ms, mk(l))
	}
	return ms
}

// TestAdaptive holds the adaptive limit to the requests in the handler:
// shedding, priorities, panics.
func TestAdaptive(t *testing.T) { guardtest.RunAdaptive(t, appWide) }
