package nethttp_test

import (
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/nethttp"
)

func TestConformance(t *testing.T) {
	guardtest.Run(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
		return nethttp.New(cfg.Limiter, cfg.Options...)(cfg.App)
	})
}
