package fiberlimit_test

import (
	"net"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/fiberlimit"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// fasthttp, not net/http, serves fiber: its peer on a Unix socket is
// whatever the connection reports, and UnixSocket asks the connection.
func TestAProxyOnAUnixSocket(t *testing.T) {
	guardtest.UnixSocketProxy(t, func(t *testing.T, l net.Listener, lim *core.Limiter, key keyfuncs.Func) {
		var opts []fiberlimit.Option
		if key != nil {
			opts = append(opts, fiberlimit.WithKey(key))
		}
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Use(fiberlimit.New(lim, opts...))
		app.Get("/", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
		go app.Listener(l)
		t.Cleanup(func() { app.Shutdown() })
	})
}
