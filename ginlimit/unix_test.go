package ginlimit_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/ginlimit"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

func TestAProxyOnAUnixSocket(t *testing.T) {
	guardtest.UnixSocketProxy(t, guardtest.ServeHTTP(func(lim *core.Limiter, key keyfuncs.Func) http.Handler {
		var opts []ginlimit.Option
		if key != nil {
			opts = append(opts, ginlimit.WithKey(key))
		}
		r := gin.New()
		r.Use(ginlimit.New(lim, opts...))
		r.GET("/", func(c *gin.Context) { c.Status(http.StatusOK) })
		return r
	}))
}
