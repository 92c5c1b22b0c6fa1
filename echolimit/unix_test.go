package echolimit_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/echolimit"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

func TestAProxyOnAUnixSocket(t *testing.T) {
	guardtest.UnixSocketProxy(t, guardtest.ServeHTTP(func(lim *core.Limiter, key keyfuncs.Func) http.Handler {
		var opts []echolimit.Option
		if key != nil {
			opts = append(opts, echolimit.WithKey(key))
		}
		e := echo.New()
		e.Use(echolimit.New(lim, opts...))
		e.GET("/", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
		return e
	}))
}
