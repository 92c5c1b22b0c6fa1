package fiberlimit

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

func TestCanonicalName(t *testing.T) {
	for _, name := range guardNames {
		t.Run(name+" is set as fasthttp normalizes it", func(t *testing.T) {
			want := fasthttp.AppendNormalizedHeaderKey(nil, name)
			if got := canonicalName(name); !bytes.Equal(got, want) || string(got) != name {
				t.Errorf("canonicalName(%q) = %q, want %q (fasthttp's form, equal to the name)", name, got, want)
			}
		})
	}
	for _, name := range []string{"X-Custom", "ratelimit", "RateLimit", "retry-after", ""} {
		t.Run(name+" is left to fasthttp to normalize", func(t *testing.T) {
			if got := canonicalName(name); got != nil {
				t.Errorf("canonicalName(%q) = %q, want nil", name, got)
			}
		})
	}
}

// setBytesVWriter is writer as it was before canonicalName: it sets every
// header with fasthttp's Set and SetBytesV, which copy and normalize the
// name (unless normalizing is disabled). Its responses are the reference.
type setBytesVWriter struct{ *writer }

func (w setBytesVWriter) SetHeader(name, value string) { w.c.Response().Header.Set(name, value) }

func (w setBytesVWriter) SetHeaderBytes(name string, value []byte) {
	w.c.Response().Header.SetBytesV(name, value)
}

// dateLine is the Date field fasthttp adds to every response.
var dateLine = regexp.MustCompile("(?m)^Date: [^\r\n]*\r\n")

type clockAt struct{ t time.Time }

func (c clockAt) Now() time.Time { return c.t }

// rawHeaders serves n requests from one client to a guard built with
// opts, setting headers through the writer wrap returns, and returns the
// raw response header of each, as fasthttp writes it on the wire.
func rawHeaders(t *testing.T, n int, normalize bool, wrap func(*writer) guard.Writer, opts ...guard.Option) [][]byte {
	t.Helper()
	clock := clockAt{time.Date(2026, 1, 1, 12, 0, 30, 500_000_000, time.UTC)}
	st := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	t.Cleanup(func() { st.Close() })
	lim, err := core.New(st, core.PerMinute(1).WithAlgorithm(core.FixedWindow).Named("per-minute"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := guard.New(lim, append([]guard.Option{guard.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New()
	app.Get("/", func(c *fiber.Ctx) error {
		w := &writer{c: c, chain: new(guard.Chain)}
		return g.Serve(view{c}, wrap(w), func(context.Context) guard.Result {
			_ = c.SendString("ok")
			return guard.Result{}
		})
	})
	h := app.Handler()
	out := make([][]byte, n)
	for i := range out {
		var req fasthttp.Request
		req.Header.SetMethod(fiber.MethodGet)
		req.SetRequestURI("/")
		fctx := new(fasthttp.RequestCtx)
		fctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}, nil)
		if !normalize {
			fctx.Response.Header.DisableNormalizing() // as fiber's DisableHeaderNormalizing has the server do
		}
		h(fctx)
		out[i] = dateLine.ReplaceAll(fctx.Response.Header.Header(), nil) // it may differ between runs
	}
	return out
}

func TestHeaderBytesUnchanged(t *testing.T) {
	// ownHeaders is a DeniedHandler that sets headers of its own, names the
	// Guard does not set as given, before the default response.
	ownHeaders := guard.WithDeniedHandler(func(w guard.Writer, r keyfuncs.Request, d *guard.Denial) error {
		w.SetHeader("x-Denied-BY", "tollgate")
		w.(guard.BytesWriter).SetHeaderBytes("retry-after", []byte("99"))
		return guard.DefaultDeniedHandler(w, r, d)
	})
	styles := []struct {
		name string
		opts []guard.Option
	}{
		{"draft-11", []guard.Option{guard.WithHeaders(guard.HeadersDraft11)}},
		{"draft-06", []guard.Option{guard.WithHeaders(guard.HeadersDraft06)}},
		{"legacy", []guard.Option{guard.WithHeaders(guard.HeadersLegacy)}},
		{"legacy with Unix resets", []guard.Option{guard.WithHeaders(guard.HeadersLegacy), guard.WithLegacyReset(guard.ResetUnix)}},
		{"none", []guard.Option{guard.WithHeaders(guard.HeadersNone)}},
		{"draft-11 with a denied handler's own headers", []guard.Option{guard.WithHeaders(guard.HeadersDraft11), ownHeaders}},
	}
	for _, s := range styles {
		for _, normalize := range []bool{true, false} {
			mode := "normalizing"
			if !normalize {
				mode = "not normalizing"
			}
			t.Run(s.name+", "+mode+", sends the bytes SetBytesV sent", func(t *testing.T) {
				// Two requests: the first allowed, the second denied.
				want := rawHeaders(t, 2, normalize, func(w *writer) guard.Writer { return setBytesVWriter{w} }, s.opts...)
				got := rawHeaders(t, 2, normalize, func(w *writer) guard.Writer { return w }, s.opts...)
				for i := range want {
					if !bytes.Equal(got[i], want[i]) {
						t.Errorf("request %d: response header\n%s\nwant\n%s", i+1, got[i], want[i])
					}
				}
				if !bytes.Contains(want[1], []byte("429")) {
					t.Errorf("second response header\n%s\nis not a 429: the denied path is not compared", want[1])
				}
			})
		}
	}
}

// BenchmarkSetHeaders sets the draft-11 headers of one response, as a
// Guard does, through writer and through the SetBytesV reference.
func BenchmarkSetHeaders(b *testing.B) {
	policy := `"bench";q=10000000;w=1`
	rateLimit := []byte(`"bench";r=9999999;t=1`)
	for _, wr := range []struct {
		name string
		wrap func(*writer) guard.BytesWriter
	}{
		{"writer", func(w *writer) guard.BytesWriter { return w }},
		{"SetBytesV", func(w *writer) guard.BytesWriter { return setBytesVWriter{w} }},
	} {
		b.Run(wr.name, func(b *testing.B) {
			app := fiber.New()
			fctx := new(fasthttp.RequestCtx)
			c := app.AcquireCtx(fctx)
			defer app.ReleaseCtx(c)
			w := wr.wrap(&writer{c: c})
			b.ReportAllocs()
			for b.Loop() {
				fctx.Response.Reset()
				w.SetHeader(guard.HeaderRateLimitPolicy, policy)
				w.SetHeaderBytes(guard.HeaderRateLimit, rateLimit)
			}
		})
	}
}
