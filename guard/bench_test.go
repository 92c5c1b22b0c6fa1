package guard_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// benchWriter is a BytesWriter over an http.Header that is reused for
// every request, so that BenchmarkServe measures the Guard alone: no
// adapter's per-request writer.
type benchWriter struct {
	h     http.Header
	vals  [4]string
	chain guard.Chain
}

func (w *benchWriter) SetHeader(name, value string) { w.h[name] = w.vals[:1] }
func (w *benchWriter) SetHeaderBytes(name string, value []byte) {
	w.h[name] = w.vals[:1]
}
func (w *benchWriter) WriteResponse(int, []byte) error { return nil }
func (w *benchWriter) Chain() *guard.Chain             { return &w.chain }

// BenchmarkServe measures Serve for one client and one limit on the
// memory store (guardtest.BenchLimiter), beside the Limiter's decision
// alone and the key function alone: what the middleware of every adapter
// spends beyond them is the Guard's flow and headers, and the adapter's
// own work.
func BenchmarkServe(b *testing.B) {
	r := keyfuncs.FromHTTP(guardtest.Requests(1, "/")[0])
	ctx := context.Background()
	key, err := keyfuncs.IP()(r)
	if err != nil {
		b.Fatal(err)
	}
	measure := func(b *testing.B, op func()) {
		b.ReportAllocs()
		start := guardtest.CPUTime()
		for b.Loop() {
			op()
		}
		guardtest.ReportCPU(b, start)
	}
	b.Run("limiter-alone", func(b *testing.B) {
		lim := guardtest.BenchLimiter(b)
		measure(b, func() { lim.AllowN(ctx, key, 1) })
	})
	b.Run("key-alone", func(b *testing.B) {
		fn := keyfuncs.IP()
		measure(b, func() { fn(r) })
	})
	next := func(context.Context) guard.Result { return guard.Result{} }
	for _, bm := range []struct {
		name  string
		style guard.HeaderStyle
	}{{"draft-11", guard.HeadersDraft11}, {"no-headers", guard.HeadersNone}} {
		b.Run(bm.name, func(b *testing.B) {
			g, err := guard.New(guardtest.BenchLimiter(b), guard.WithHeaders(bm.style))
			if err != nil {
				b.Fatal(err)
			}
			w := &benchWriter{h: make(http.Header, 4)}
			measure(b, func() { g.Serve(r, w, next) })
			if bm.style == guard.HeadersDraft11 && len(w.h) != 2 {
				b.Fatalf("headers set: %v, want RateLimit-Policy and RateLimit", w.h)
			}
		})
	}
}

// BenchmarkServeAdaptive is BenchmarkServe's draft-11 case with the
// adaptive concurrency limit beside the rate limit: what WithAdaptive adds
// per request (an Acquire, a Release with its latency sample).
func BenchmarkServeAdaptive(b *testing.B) {
	r := keyfuncs.FromHTTP(guardtest.Requests(1, "/")[0])
	ad, err := adaptive.New(adaptive.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	g, err := guard.New(guardtest.BenchLimiter(b), guard.WithAdaptive(ad))
	if err != nil {
		b.Fatal(err)
	}
	w := &benchWriter{h: make(http.Header, 4)}
	next := func(context.Context) guard.Result { return guard.Result{} }
	b.ReportAllocs()
	start := guardtest.CPUTime()
	for b.Loop() {
		g.Serve(r, w, next)
	}
	guardtest.ReportCPU(b, start)
	if s := ad.Stats(); s.InFlight != 0 || s.Shed != 0 {
		b.Fatalf("adaptive limit %+v after the loop, want nothing in flight, nothing shed", s)
	}
}
