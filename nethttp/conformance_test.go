package nethttp_test

import (
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/nethttp"
)

// TestConformance runs the shared table. The app-wide middlewares wrap
// the mux, where no route is known yet; the group's wrap a mux mounted
// on the group's subtree.
func TestConformance(t *testing.T) {
	guardtest.Run(t, build)
}

// TestInFlight holds concurrency limits to the requests in the handler,
// panics included.
func TestInFlight(t *testing.T) { guardtest.RunInFlight(t, build) }

// TestSlowRefund refunds a request that fails after a window's end to the
// window it was taken from.
func TestSlowRefund(t *testing.T) { guardtest.RunSlowRefund(t, build) }

// build mounts cfg's layers the net/http way: middleware around a mux.
func build(t *testing.T, cfg guardtest.Config) http.Handler {
	route := wrap(cfg.App, cfg.In(guardtest.OnRoute))
	api := http.NewServeMux()
	api.Handle(guardtest.RoutePath, route)
	api.Handle(guardtest.GroupPath, cfg.App)
	mux := http.NewServeMux()
	mux.Handle(guardtest.GroupPrefix+"/", wrap(api, cfg.In(guardtest.Grouped)))
	mux.Handle("/", cfg.App)
	return wrap(mux, cfg.In(guardtest.AppWide))
}

// wrap puts h behind the middlewares of layers, the first outermost.
func wrap(h http.Handler, layers []guardtest.Layer) http.Handler {
	for i := len(layers) - 1; i >= 0; i-- {
		h = nethttp.New(layers[i].Limiter, layers[i].Options...)(h)
	}
	return h
}

// TestAdaptive holds the adaptive limit to the requests in the handler:
// shedding, priorities, panics.
func TestAdaptive(t *testing.T) { guardtest.RunAdaptive(t, build) }

// TestConformanceLeased runs the table with leases on (package lease).
func TestConformanceLeased(t *testing.T) { guardtest.RunLeased(t, build, false) }
