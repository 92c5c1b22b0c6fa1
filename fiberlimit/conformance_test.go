package fiberlimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/tollgate/tollgate/fiberlimit"
	"github.com/tollgate/tollgate/guard/guardtest"
)

// TestConformance runs the shared table through a fiber app, bridged to
// net/http by fiber's adaptor. fiber's adaptor.HTTPHandler runs an
// http.Handler with fasthttp's RequestCtx as its context, which drops the
// context the middleware passes on (and with it the cost slot of
// WithReportedCost), so the table's App is mounted through withUserContext,
// which hands it c.UserContext() instead.
//
// Middleware added with app.Use or to a group runs before fiber picks the
// route that answers, so the table runs with Run, not RunKnownRoutes.
func TestConformance(t *testing.T) { guardtest.Run(t, build) }

// TestConformanceLeased runs the table with leases on (package lease).
func TestConformanceLeased(t *testing.T) { guardtest.RunLeased(t, build, false) }

// build mounts cfg's layers with app.Use, the group's and the route's.
func build(t *testing.T, cfg guardtest.Config) http.Handler {
	app := fiber.New()
	for _, h := range handlers(cfg.In(guardtest.AppWide)) {
		app.Use(h)
	}
	api := app.Group(guardtest.GroupPrefix, handlers(cfg.In(guardtest.Grouped))...)
	api.All(guardtest.RoutePath[len(guardtest.GroupPrefix):], append(handlers(cfg.In(guardtest.OnRoute)), withUserContext(cfg.App))...)
	api.All(guardtest.GroupPath[len(guardtest.GroupPrefix):], withUserContext(cfg.App))
	app.Use(withUserContext(cfg.App))
	return adaptor.FiberApp(app)
}

// TestInFlight holds concurrency limits to the requests in the handler,
// panics included.
func TestInFlight(t *testing.T) { guardtest.RunInFlight(t, appWide) }

// TestSlowRefund refunds a request that fails after a window's end to the
// window it was taken from.
func TestSlowRefund(t *testing.T) { guardtest.RunSlowRefund(t, appWide) }

// appWide mounts cfg's app-wide layers with app.Use, and the app.
func appWide(t *testing.T, cfg guardtest.Config) http.Handler {
	app := fiber.New()
	for _, h := range handlers(cfg.In(guardtest.AppWide)) {
		app.Use(h)
	}
	app.Use(withUserContext(cfg.App))
	return adaptor.FiberApp(app)
}

// handlers returns the middlewares of layers, outermost first.
func handlers(layers []guardtest.Layer) []fiber.Handler {
	hs := make([]fiber.Handler, 0, len(layers))
	for _, l := range layers {
		hs = append(hs, fiberlimit.New(l.Limiter, l.Options...))
	}
	return hs
}

// withUserContext runs h as a fiber handler, with c.UserContext() as the
// request's context, and copies its response into c.
func withUserContext(h http.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		r, err := adaptor.ConvertRequest(c, true)
		if err != nil {
			return err
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r.WithContext(c.UserContext()))
		for k, vs := range rec.Header() {
			for _, v := range vs {
				c.Response().Header.Add(k, v)
			}
		}
		c.Status(rec.Code)
		return c.Send(rec.Body.Bytes())
	}
}

// TestAdaptive holds the adaptive limit to the requests in the handler:
// shedding, priorities, panics.
func TestAdaptive(t *testing.T) { guardtest.RunAdaptive(t, appWide) }
