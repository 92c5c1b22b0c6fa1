package guardtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// NewLimiter returns a Limiter of limits over st — when st is nil, a fresh
// memstore that does not sweep, closed with t — on a clock fixed at Epoch.
// It fails t on an invalid limit.
func NewLimiter(t testing.TB, st core.Store, limits ...core.Limit) *core.Limiter {
	t.Helper()
	clock := NewClock(Epoch)
	if st == nil {
		ms := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
		t.Cleanup(func() { ms.Close() })
		st = ms
	}
	opts := []core.Option{core.WithClock(clock)}
	for _, l := range limits {
		opts = append(opts, l)
	}
	lim, err := core.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// Requests returns n GET requests for path from n distinct client
// addresses (10.x.y.z), for benchmarks over many clients.
func Requests(n int, path string) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
		reqs[i] = r
	}
	return reqs
}

// BenchQuota per BenchPeriod is the limit of BenchLimiter and of the
// adapters' benchmarks: a rate no benchmark reaches on one machine (10
// million a second), so that every request is admitted, and small enough
// that the engine decides it on its common path (every product within
// 2^53, as most users' limits are), not the 128-bit path of enormous
// (wide) limits.
const (
	BenchQuota  = 10_000_000
	BenchPeriod = time.Second
)

// BenchLimiter returns a Limiter that admits every request of a benchmark:
// a sliding window of BenchQuota per BenchPeriod named "bench", on a fresh
// memstore closed with b; so the path measured is the common one (an
// existing key, allowed).
func BenchLimiter(b testing.TB) *core.Limiter {
	b.Helper()
	st := memstore.New()
	b.Cleanup(func() { st.Close() })
	lim, err := core.New(st, core.Per(BenchQuota, BenchPeriod).Named("bench"))
	if err != nil {
		b.Fatal(err)
	}
	return lim
}

// BenchThreeLimits returns a Limiter of the README's three limits, 10 a
// second, 120 a minute and 240 an hour, each scaled by 2^30 so that a
// benchmark's requests all pass ("second", "minute" and "hour"), on a fresh
// memstore closed with b: the decision on several limits at once that the
// adapters' benchmarks measure beside BenchLimiter's one.
func BenchThreeLimits(b testing.TB) *core.Limiter {
	b.Helper()
	st := memstore.New()
	b.Cleanup(func() { st.Close() })
	lim, err := core.New(st, core.PerSecond(10<<30).Named("second"), core.PerMinute(120<<30).Named("minute"), core.PerHour(240<<30).Named("hour"))
	if err != nil {
		b.Fatal(err)
	}
	return lim
}

// Discard is an http.ResponseWriter that keeps nothing but its headers, so
// that benchmarks measure the router and middleware, not
// httptest.ResponseRecorder. Clear H between requests.
type Discard struct{ H http.Header }

// Header implements http.ResponseWriter.
func (d *Discard) Header() http.Header { return d.H }

// Write implements http.ResponseWriter.
func (d *Discard) Write(b []byte) (int, error) { return len(b), nil }

// WriteHeader implements http.ResponseWriter.
func (d *Discard) WriteHeader(int) {}

// BenchDecision measures lim's decision alone for key, cost 1: what a
// middleware benchmark over lim spends beyond it is the middleware's and
// its framework's. Run it beside the middleware, in the same benchmark,
// so that both see the same machine.
func BenchDecision(b *testing.B, lim *core.Limiter, key string) {
	b.Helper()
	ctx := context.Background()
	if d, err := lim.AllowN(ctx, key, 1); err != nil || !d.Allowed {
		b.Fatalf("AllowN(%q, 1) = %v, %v; want allowed", key, d.Allowed, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := CPUTime()
	for b.Loop() {
		_, _ = lim.AllowN(ctx, key, 1)
	}
	ReportCPU(b, start)
}

// UncomparableContext returns parent as a context of a type that == cannot
// compare (a struct value with a slice field), carrying the value "seen"
// under UncomparableKey: a program may set such a context on a request, and
// a middleware that compares it with == panics.
func UncomparableContext(parent context.Context) context.Context {
	return uncomparable{parent, []string{"seen"}}
}

// UncomparableKey is the key of the value UncomparableContext carries.
type UncomparableKey struct{}

type uncomparable struct {
	context.Context
	tags []string
}

func (c uncomparable) Value(key any) any {
	if key == (UncomparableKey{}) {
		return c.tags[0]
	}
	return c.Context.Value(key)
}
