package otellimit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/otellimit"
)

var t0 = time.Unix(1_700_006_400, 0)

// downStore is a remote store that refuses every connection.
type downStore struct{}

var refused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

func (downStore) Apply(context.Context, engine.Op) (engine.Result, error) {
	return engine.Result{}, refused
}
func (downStore) Close() error { return nil }

func mustLimiter(t *testing.T, store core.Store, opts ...core.Option) *core.Limiter {
	t.Helper()
	lim, err := core.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// collect reads every data point of reader as "name{k=v,...}" → value;
// histograms as name_count and name_sum.
func collect(t *testing.T, reader *sdkmetric.ManualReader) (map[string]float64, map[string]string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out, units := map[string]float64{}, map[string]string{}
	key := func(name string, set attribute.Set) string {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, fmt.Sprintf("%s=%s", a.Key, a.Value.Emit()))
		}
		sort.Strings(kv)
		return name + "{" + strings.Join(kv, ",") + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otellimit.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otellimit.ScopeName)
		}
		for _, m := range sm.Metrics {
			units[m.Name] = m.Unit
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic {
					t.Errorf("%s is not monotonic, want a counter", m.Name)
				}
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name+"_count", p.Attributes)] = float64(p.Count)
					out[key(m.Name+"_sum", p.Attributes)] = p.Sum
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out, units
}

// A scripted sequence, read back through the SDK's in-memory reader: the
// counts are the ones the script implies, the units those of the
// semantic conventions' style.
func TestMetricsOfAScriptedSequence(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := otellimit.New(otellimit.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	clock := core.ClockFunc(func() time.Time { return t0 })
	store := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0), memstore.WithMaxKeys(256),
		memstore.WithShards(1), memstore.WithName("app"), memstore.WithObserver(obs), memstore.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	api := mustLimiter(t, store, core.PerSecond(2).Named("per-second"), core.WithName("api"), core.WithClock(clock), core.WithObserver(obs))
	api.Allow(ctx, "a")                               // allowed
	api.AllowN(ctx, "a", 1)                           // allowed
	api.Allow(ctx, "a")                               // denied
	api.Allow(core.ContextWithDryRun(ctx, true), "a") // dry-run denied
	queue := mustLimiter(t, store, core.PerSecond(10).WithAlgorithm(core.LeakyBucket).Named("queue"),
		core.WithName("queue"), core.WithClock(clock), core.WithObserver(obs))
	queue.Allow(ctx, "q")
	queue.Allow(ctx, "q") // waits 100ms
	remote := mustLimiter(t, downStore{}, core.PerSecond(10).Named("per-second"), core.WithName("remote"),
		core.WithFailurePolicy(core.FailOpen), core.WithObserver(obs), core.WithLogger(slog.New(slog.DiscardHandler)))
	remote.Allow(ctx, "r") // refused: the breaker opens
	remote.Allow(ctx, "r") // skipped
	bulk := mustLimiter(t, store, core.PerHour(10).Named("hourly"), core.WithName("bulk"), core.WithClock(clock), core.WithObserver(obs))
	for i := range 300 { // 2 keys held, room for 254 more: 46 keys with usage evicted
		bulk.Allow(ctx, fmt.Sprint("k", i))
	}
	store.Close()
	for _, e := range []core.Event{
		{Kind: core.EventScriptLoad, Store: "redisstore", Count: 2},
		{Kind: core.EventCompensation, Store: "redisstore", Count: 1, Err: errors.New("timeout")},
		{Kind: core.EventRedirect, Store: "redisstore", Count: 3},
		{Kind: core.EventTopologyReload, Store: "redisstore", Count: 1},
		{Kind: core.EventStoreFailure, Store: "redisstore", Count: 1, Err: refused},
		{Kind: core.EventAdaptive, Limiter: "edge", Count: 7, Limit: 15, InFlight: 12, Latency: 20 * time.Millisecond},
		{Kind: core.EventAdaptive, Limiter: "edge", Count: 0, Limit: 16, InFlight: 3, Latency: 20 * time.Millisecond},
	} {
		obs.ObserveEvent(ctx, &e)
	}

	got, units := collect(t, reader)
	want := map[string]float64{
		"tollgate.decisions{ratelimit.limiter=api,ratelimit.operation=take,ratelimit.outcome=allowed,ratelimit.policy=per-second}":        2,
		"tollgate.decisions{ratelimit.limiter=api,ratelimit.operation=take,ratelimit.outcome=denied,ratelimit.policy=per-second}":         1,
		"tollgate.decisions{ratelimit.limiter=api,ratelimit.operation=take,ratelimit.outcome=dry_run_denied,ratelimit.policy=per-second}": 1,
		"tollgate.decisions{ratelimit.limiter=remote,ratelimit.operation=take,ratelimit.outcome=failed_open,ratelimit.policy=per-second}": 2,
		"tollgate.decisions{ratelimit.limiter=bulk,ratelimit.operation=take,ratelimit.outcome=allowed,ratelimit.policy=hourly}":           300,
		"tollgate.cost{ratelimit.limiter=api,ratelimit.operation=take,ratelimit.outcome=allowed,ratelimit.policy=per-second}":             2,
		"tollgate.store.duration_count{ratelimit.limiter=api,ratelimit.operation=take}":                                                   4,
		"tollgate.store.duration_count{ratelimit.limiter=remote,ratelimit.operation=take}":                                                1,
		"tollgate.wait.duration_count{ratelimit.limiter=queue,ratelimit.policy=queue}":                                                    1,
		"tollgate.wait.duration_sum{ratelimit.limiter=queue,ratelimit.policy=queue}":                                                      0.1,
		"tollgate.breaker.state{ratelimit.breaker.state=open,ratelimit.limiter=remote,ratelimit.part=}":                                   1,
		"tollgate.breaker.state{ratelimit.breaker.state=closed,ratelimit.limiter=remote,ratelimit.part=}":                                 0,
		"tollgate.breaker.transitions{ratelimit.breaker.state=open,ratelimit.limiter=remote,ratelimit.part=}":                             1,
		"tollgate.store.keys{ratelimit.store=app}":                                                                                        256,
		"tollgate.store.evictions{ratelimit.eviction.lossy=true,ratelimit.store=app}":                                                     46,
		"tollgate.store.script_loads{ratelimit.store=redisstore}":                                                                         2,
		"tollgate.store.compensations{ratelimit.compensation.result=failed,ratelimit.store=redisstore}":                                   1,
		"tollgate.store.redirects{ratelimit.store=redisstore}":                                                                            3,
		"tollgate.store.topology_reloads{ratelimit.store=redisstore}":                                                                     1,
		"tollgate.store.failures{ratelimit.store=redisstore}":                                                                             1,
		"tollgate.adaptive.limit{ratelimit.limiter=edge}":                                                                                 16,
		"tollgate.adaptive.in_flight{ratelimit.limiter=edge}":                                                                             3,
		"tollgate.adaptive.latency{ratelimit.limiter=edge}":                                                                               0.02,
		"tollgate.adaptive.shed{ratelimit.limiter=edge}":                                                                                  7,
	}
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("no data point %s, want %v", k, v)
		} else if diff := g - v; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	for name, unit := range map[string]string{"tollgate.decisions": "{decision}", "tollgate.cost": "{unit}",
		"tollgate.store.duration": "s", "tollgate.wait.duration": "s", "tollgate.store.keys": "{key}"} {
		if units[name] != unit {
			t.Errorf("unit of %s = %q, want %q", name, units[name], unit)
		}
	}
	for k := range got {
		if strings.Contains(k, "=a,") || strings.Contains(k, "=k1") || strings.Contains(k, "ratelimit.key") {
			t.Errorf("a data point carries a key: %s", k)
		}
	}
	if t.Failed() {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Logf("collected:\n%s", strings.Join(keys, "\n"))
	}
}

// spanEvents returns the events of the one span recorded, as name and
// attributes.
func spanEvents(t *testing.T, sr *tracetest.SpanRecorder) []string {
	t.Helper()
	spans := sr.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans ended, want 1", len(spans))
	}
	var out []string
	for _, e := range spans[0].Events() {
		var kv []string
		for _, a := range e.Attributes {
			kv = append(kv, fmt.Sprintf("%s=%s", a.Key, a.Value.Emit()))
		}
		out = append(out, e.Name+" "+strings.Join(kv, " "))
	}
	return out
}

// A decision made under a recording span is added to it as an event;
// the key only when the user opts in.
func TestDecisionsAreSpanEvents(t *testing.T) {
	for _, c := range []struct {
		name    string
		withKey bool
		key     string
	}{
		{"without the key by default", false, ""},
		{"with the key when opted in", true, " ratelimit.key=user-7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sr := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
			obs, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider()), otellimit.WithKey(c.withKey))
			if err != nil {
				t.Fatal(err)
			}
			store := memstore.New(memstore.WithSweepInterval(0))
			defer store.Close()
			clock := core.ClockFunc(func() time.Time { return t0 })
			lim := mustLimiter(t, store, core.PerMinute(1).WithAlgorithm(core.FixedWindow).Named("per-minute"), core.WithName("api"), core.WithClock(clock), core.WithObserver(obs))
			ctx, span := tp.Tracer("test").Start(context.Background(), "GET /search")
			lim.Allow(ctx, "user-7")
			lim.Allow(ctx, "user-7")
			span.End()
			lim.Allow(context.Background(), "user-7") // no span: nothing recorded
			got := spanEvents(t, sr)
			want := []string{
				"ratelimit.decision ratelimit.limiter=api ratelimit.policy=per-minute ratelimit.operation=take ratelimit.outcome=allowed ratelimit.cost=1 ratelimit.remaining=0" + c.key,
				"ratelimit.decision ratelimit.limiter=api ratelimit.policy=per-minute ratelimit.operation=take ratelimit.outcome=denied ratelimit.cost=1 ratelimit.remaining=0 ratelimit.retry_after=60" + c.key,
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("span events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// A breaker opening under a request's span is an event of that span.
func TestBreakerTransitionsAreSpanEvents(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	obs, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	lim := mustLimiter(t, downStore{}, core.PerSecond(1), core.WithName("remote"), core.WithFailurePolicy(core.FailOpen),
		core.WithObserver(obs), core.WithLogger(slog.New(slog.DiscardHandler)))
	ctx, span := tp.Tracer("test").Start(context.Background(), "GET /")
	lim.Allow(ctx, "k")
	span.End()
	got := spanEvents(t, sr)
	if len(got) != 2 || got[0] != "ratelimit.breaker ratelimit.limiter=remote ratelimit.part= ratelimit.breaker.from=closed ratelimit.breaker.state=open" ||
		!strings.Contains(got[1], "ratelimit.outcome=failed_open") {
		t.Errorf("span events = %q, want the breaker's opening, then the decision", got)
	}
}

func TestNewRejectsANilProvider(t *testing.T) {
	if _, err := otellimit.New(otellimit.WithMeterProvider(nil)); !errors.Is(err, otellimit.ErrInvalidOption) {
		t.Errorf("New(WithMeterProvider(nil)) = %v, want ErrInvalidOption", err)
	}
}

func BenchmarkAllowObserved(b *testing.B) {
	obs, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	if err != nil {
		b.Fatal(err)
	}
	store := memstore.New(memstore.WithSweepInterval(0))
	defer store.Close()
	lim, err := core.New(store, core.PerSecond(1_000_000_000), core.WithObserver(obs))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			lim.Allow(ctx, "k")
		}
	})
}
