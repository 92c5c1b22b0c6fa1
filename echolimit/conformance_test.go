package echolimit_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/echolimit"
	"github.com/tollgate/tollgate/guard/guardtest"
)

func TestConformance(t *testing.T) {
	guardtest.Run(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
		e := echo.New()
		e.Use(echolimit.New(cfg.Limiter, cfg.Options...))
		e.Any("/*", echo.WrapHandler(cfg.App))
		return e
	})
}

// TestConformanceWithConfig runs the table through NewWithConfig, as
// route middleware, with the guard options passed in Config.Options.
func TestConformanceWithConfig(t *testing.T) {
	guardtest.Run(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
		e := echo.New()
		mw := echolimit.NewWithConfig(echolimit.Config{Limiter: cfg.Limiter, Options: cfg.Options})
		e.Any("/*", echo.WrapHandler(cfg.App), mw)
		return e
	})
}
