package guardtest_test

import (
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/nethttp"
)

// An adapter's conformance test: build the application of each case with
// the adapter's middleware in front of cfg.App, and the shared table checks
// statuses, headers and bodies.
func ExampleRun() {
	_ = func(t *testing.T) {
		guardtest.Run(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
			return nethttp.New(cfg.Limiter, cfg.Options...)(cfg.App)
		})
	}
}
