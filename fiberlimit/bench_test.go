package fiberlimit_test

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/limiter"
	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/fiberlimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// The benchmarks drive app.Handler() with a fasthttp.RequestCtx, with no
// network, resetting the response and the user values between requests as
// fasthttp's server does. The handler answers 204.

// benchQuota per benchPeriod (guardtest's) is a rate no run reaches, so
// that every request is admitted and the common path (an existing key,
// allowed) is measured.
const (
	benchQuota  = guardtest.BenchQuota
	benchPeriod = guardtest.BenchPeriod
)

func sink(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusNoContent) }

// benchLimiter is one fixed-window limit of benchQuota per benchPeriod on a
// memstore with its default clock and sweeping.
func benchLimiter(b *testing.B) *core.Limiter {
	b.Helper()
	st := newMemstore(b)
	lim, err := core.New(st, core.Per(benchQuota, benchPeriod).WithAlgorithm(core.FixedWindow).Named("bench"))
	if err != nil {
		b.Fatal(err)
	}
	return lim
}

// fiberLimiter is fiber's own middleware/limiter with the same limit, on
// its default memory storage (fixed window, keyed by c.IP()).
func fiberLimiter() fiber.Handler {
	return limiter.New(limiter.Config{Max: benchQuota, Expiration: benchPeriod})
}

// newApp returns an app with mw (if any) in front of sink on "/".
func newApp(mw ...fiber.Handler) fasthttp.RequestHandler {
	app := fiber.New()
	for _, h := range mw {
		app.Use(h)
	}
	app.Get("/", sink)
	return app.Handler()
}

// variants are the apps every benchmark compares.
func variants(b *testing.B) []struct {
	name string
	h    func() fasthttp.RequestHandler
} {
	return []struct {
		name string
		h    func() fasthttp.RequestHandler
	}{
		{"bare", func() fasthttp.RequestHandler { return newApp() }},
		{"fiberlimit", func() fasthttp.RequestHandler { return newApp(fiberlimit.New(benchLimiter(b))) }},
		{"fiberlimit-three-limits", func() fasthttp.RequestHandler { return newApp(fiberlimit.New(guardtest.BenchThreeLimits(b))) }},
		{"fiberlimit-no-headers", func() fasthttp.RequestHandler {
			return newApp(fiberlimit.New(benchLimiter(b), fiberlimit.WithHeaders(guard.HeadersNone)))
		}},
		{"fiber-limiter", func() fasthttp.RequestHandler { return newApp(fiberLimiter()) }},
	}
}

// addrs returns n distinct client addresses.
func addrs(n int) []net.Addr {
	as := make([]net.Addr, n)
	for i := range as {
		as[i] = &net.TCPAddr{IP: net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)), Port: 1234}
	}
	return as
}

func newCtx(addr net.Addr) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(fiber.MethodGet)
	req.SetRequestURI("/")
	fctx := new(fasthttp.RequestCtx)
	fctx.Init(&req, addr, nil)
	return fctx
}

// serveOne runs one request on fctx, as fasthttp's server would.
func serveOne(h fasthttp.RequestHandler, fctx *fasthttp.RequestCtx) {
	fctx.Response.Reset()
	fctx.ResetUserValues()
	h(fctx)
}

func run(b *testing.B, h fasthttp.RequestHandler, as []net.Addr) {
	b.Helper()
	fctx := newCtx(as[0])
	serveOne(h, fctx)
	if got := fctx.Response.StatusCode(); got != fiber.StatusNoContent {
		b.Fatalf("status = %d, want 204", got)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := guardtest.CPUTime()
	for i := 0; b.Loop(); i++ {
		if len(as) > 1 {
			fctx.SetRemoteAddr(as[i%len(as)])
		}
		serveOne(h, fctx)
	}
	guardtest.ReportCPU(b, start)
}

// BenchmarkMiddleware compares a bare app, the app behind fiberlimit (one
// limit, draft-11 headers, memstore), without headers, and behind fiber's
// own limiter with the same limit; one client.
func BenchmarkMiddleware(b *testing.B) {
	as := addrs(1)
	b.Run("limiter-alone", func(b *testing.B) { guardtest.BenchDecision(b, benchLimiter(b), "10.0.0.0") })
	for _, v := range variants(b) {
		b.Run(v.name, func(b *testing.B) { run(b, v.h(), as) })
	}
}

// BenchmarkMiddlewareParallel is BenchmarkMiddleware under b.RunParallel,
// over 100k distinct clients.
func BenchmarkMiddlewareParallel(b *testing.B) {
	as := addrs(100_000)
	checkDistinct(b, as)
	for _, v := range variants(b) {
		b.Run(v.name, func(b *testing.B) {
			h := v.h()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				fctx := newCtx(as[0])
				i := rand.IntN(len(as))
				for pb.Next() {
					fctx.SetRemoteAddr(as[i%len(as)])
					serveOne(h, fctx)
					i++
				}
			})
		})
	}
}

// BenchmarkMiddlewareKeys varies the number of distinct clients.
func BenchmarkMiddlewareKeys(b *testing.B) {
	for _, n := range []int{1, 1_000, 100_000} {
		as := addrs(n)
		checkDistinct(b, as)
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) { run(b, newApp(fiberlimit.New(benchLimiter(b))), as) })
	}
}

// checkDistinct fails the benchmark unless every address has its own key.
func checkDistinct(b *testing.B, as []net.Addr) {
	b.Helper()
	seen := make(map[string]bool, len(as))
	for _, a := range as {
		k, err := keyfuncs.IP()(keyfuncs.FromHTTP(&http.Request{RemoteAddr: a.String()}))
		if err != nil || seen[k] {
			b.Fatalf("key %q of %s: duplicate or error %v", k, a, err)
		}
		seen[k] = true
	}
}

// TestAllocationsPerRequest pins what BenchmarkMiddleware measures: with
// one limit and draft-11 headers, a request costs at most the 2
// allocations of DESIGN §5 (it costs 1: the key, the peer's address
// formatted from view.PeerAddr; the headers are copied into fasthttp's
// buffers).
func TestAllocationsPerRequest(t *testing.T) {
	lim := newLimiter(t, nil, core.Per(benchQuota, benchPeriod).Named("bench"))
	h := newApp(fiberlimit.New(lim))
	fctx := newCtx(addrs(1)[0])
	got := testing.AllocsPerRun(1000, func() { serveOne(h, fctx) })
	if got > 2 {
		t.Errorf("allocations per request = %v, want at most 2", got)
	}
	if len(fctx.Response.Header.Peek(guard.HeaderRateLimit)) == 0 || fctx.Response.StatusCode() != fiber.StatusNoContent {
		t.Errorf("status %d, RateLimit %q: the request did not take the path measured", fctx.Response.StatusCode(), fctx.Response.Header.Peek(guard.HeaderRateLimit))
	}
}
