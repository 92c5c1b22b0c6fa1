package fiberlimit_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard/guardtest"
)

var newLimiter = guardtest.NewLimiter

// newMemstore returns a memstore that does not sweep, closed with t.
func newMemstore(t testing.TB) *memstore.Store {
	t.Helper()
	ms := memstore.New(memstore.WithSweepInterval(0))
	t.Cleanup(func() { ms.Close() })
	return ms
}

func fixed(n int64, name string) core.Limit {
	return core.PerMinute(n).WithAlgorithm(core.FixedWindow).Named(name)
}

// peer is the remote address of the requests of do.
var peer = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}

// serve sends one request straight to app's fasthttp handler, from peer,
// with the given header name/value pairs, and returns its RequestCtx.
func serve(app *fiber.App, method, target string, header ...string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(target)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	fctx := new(fasthttp.RequestCtx)
	fctx.Init(&req, peer, nil)
	app.Handler()(fctx)
	return fctx
}

// do is serve returning the response, with a body stream read.
func do(app *fiber.App, method, target string, header ...string) *fasthttp.Response {
	fctx := serve(app, method, target, header...)
	fctx.Response.Body() // reads a body stream, which CopyTo skips
	resp := new(fasthttp.Response)
	fctx.Response.CopyTo(resp)
	return resp
}

// ok is a handler that answers 200 "ok".
func ok(c *fiber.Ctx) error { return c.SendString("ok") }

func netipPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
