package promlimit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/promlimit"
)

// t0 is a fixed instant on a second boundary.
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

// scrape serves reg's /metrics over HTTP and parses the answer with
// Prometheus's text parser into "name{label="value",...}" → value, with
// histograms as name_count and name_sum.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			ls := "{" + strings.Join(labels, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name+ls] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+ls] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+ls] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+ls] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// A scripted sequence of decisions and events, scraped from a real
// /metrics endpoint: every count is the one the script implies.
func TestMetricsOfAScriptedSequence(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := promlimit.New()
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(obs)
	clock := core.ClockFunc(func() time.Time { return t0 })
	store := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0), memstore.WithMaxKeys(256),
		memstore.WithShards(1), memstore.WithName("app"), memstore.WithObserver(obs), memstore.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()

	api := mustLimiter(t, store, core.PerSecond(2).Named("per-second"), core.WithName("api"), core.WithClock(clock), core.WithObserver(obs))
	api.Allow(ctx, "a")                               // allowed
	api.AllowN(ctx, "a", 1)                           // allowed
	api.Allow(ctx, "a")                               // denied
	api.Allow(core.ContextWithDryRun(ctx, true), "a") // dry-run denied
	api.Refund(ctx, "a", 1)                           // a refund
	api.AllowN(ctx, "a", -1)                          // invalid
	queue := mustLimiter(t, store, core.PerSecond(10).WithAlgorithm(core.LeakyBucket).Named("queue"),
		core.WithName("queue"), core.WithClock(clock), core.WithObserver(obs))
	queue.Allow(ctx, "q")
	queue.Allow(ctx, "q") // waits 100ms
	remote := mustLimiter(t, downStore{}, core.PerSecond(10).Named("per-second"), core.WithName("remote"),
		core.WithFailurePolicy(core.FailOpen), core.WithObserver(obs), core.WithLogger(slog.New(slog.DiscardHandler)))
	remote.Allow(ctx, "r") // refused: the breaker opens
	remote.Allow(ctx, "r") // skipped by the open breaker
	bulk := mustLimiter(t, store, core.PerHour(10).Named("hourly"), core.WithName("bulk"), core.WithClock(clock), core.WithObserver(obs))
	for i := range 300 { // 2 keys held, room for 254 more: 46 keys with usage evicted
		bulk.Allow(ctx, fmt.Sprint("k", i))
	}
	store.Close() // reports the keys and evictions
	for _, e := range []core.Event{
		{Kind: core.EventScriptLoad, Store: "redisstore", Count: 2},
		{Kind: core.EventCompensation, Store: "redisstore", Count: 1},
		{Kind: core.EventCompensation, Store: "redisstore", Count: 1, Err: errors.New("timeout")},
		{Kind: core.EventRedirect, Store: "redisstore", Count: 3},
		{Kind: core.EventTopologyReload, Store: "redisstore", Count: 1},
		{Kind: core.EventStoreFailure, Store: "redisstore", Count: 1, Err: refused},
		{Kind: core.EventAdaptive, Limiter: "edge", Count: 7, Limit: 15, InFlight: 12, Latency: 20 * time.Millisecond},
		{Kind: core.EventAdaptive, Limiter: "edge", Count: 0, Limit: 16, InFlight: 3, Latency: 20 * time.Millisecond},
	} {
		obs.ObserveEvent(ctx, &e)
	}

	got := scrape(t, reg)
	want := map[string]float64{
		`tollgate_decisions_total{limiter="api",operation="take",outcome="allowed",policy="per-second"}`:        2,
		`tollgate_decisions_total{limiter="api",operation="take",outcome="denied",policy="per-second"}`:         1,
		`tollgate_decisions_total{limiter="api",operation="take",outcome="dry_run_denied",policy="per-second"}`: 1,
		`tollgate_decisions_total{limiter="api",operation="refund",outcome="allowed",policy="per-second"}`:      1,
		`tollgate_decisions_total{limiter="api",operation="take",outcome="invalid",policy="per-second"}`:        1,
		`tollgate_decisions_total{limiter="queue",operation="take",outcome="allowed",policy="queue"}`:           2,
		`tollgate_decisions_total{limiter="remote",operation="take",outcome="failed_open",policy="per-second"}`: 2,
		`tollgate_decisions_total{limiter="bulk",operation="take",outcome="allowed",policy="hourly"}`:           300,
		`tollgate_cost_total{limiter="api",operation="take",outcome="allowed",policy="per-second"}`:             2,
		`tollgate_cost_total{limiter="api",operation="refund",outcome="allowed",policy="per-second"}`:           1,
		`tollgate_store_duration_seconds_count{limiter="api",operation="take"}`:                                 5, // the store rejects the invalid cost
		`tollgate_store_duration_seconds_count{limiter="remote",operation="take"}`:                              1, // the skipped one made none
		`tollgate_store_duration_seconds_count{limiter="bulk",operation="take"}`:                                300,
		`tollgate_wait_seconds_count{limiter="queue",policy="queue"}`:                                           1,
		`tollgate_wait_seconds_sum{limiter="queue",policy="queue"}`:                                             0.1,
		`tollgate_breaker_state{limiter="remote",part="",state="open"}`:                                         1,
		`tollgate_breaker_state{limiter="remote",part="",state="closed"}`:                                       0,
		`tollgate_breaker_transitions_total{limiter="remote",part="",to="open"}`:                                1,
		`tollgate_keys{store="app"}`:                                             256,
		`tollgate_evictions_total{lossy="true",store="app"}`:                     46,
		`tollgate_store_script_loads_total{store="redisstore"}`:                  2,
		`tollgate_store_compensations_total{result="undone",store="redisstore"}`: 1,
		`tollgate_store_compensations_total{result="failed",store="redisstore"}`: 1,
		`tollgate_store_redirects_total{store="redisstore"}`:                     3,
		`tollgate_store_topology_reloads_total{store="redisstore"}`:              1,
		`tollgate_store_failures_total{store="redisstore"}`:                      1,
		`tollgate_adaptive_limit{limiter="edge"}`:                                16,
		`tollgate_adaptive_in_flight{limiter="edge"}`:                            3,
		`tollgate_adaptive_latency_seconds{limiter="edge"}`:                      0.02,
		`tollgate_adaptive_shed_total{limiter="edge"}`:                           7,
	}
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("/metrics has no %s, want %v", k, v)
		} else if diff := g - v; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("/metrics %s = %v, want %v", k, g, v)
		}
	}
	for k := range got {
		if strings.Contains(k, `"a"`) || strings.Contains(k, `"k1"`) {
			t.Errorf("/metrics has a key as a label: %s", k)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "tollgate_wait_seconds") && !strings.Contains(k, `limiter="queue"`) {
			t.Errorf("/metrics has %s: a wait series for a limiter that never waited", k)
		}
	}
	if t.Failed() {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Logf("scraped:\n%s", strings.Join(keys, "\n"))
	}
}

func TestNewRejectsBadBuckets(t *testing.T) {
	for _, opt := range []promlimit.Option{promlimit.WithLatencyBuckets(nil), promlimit.WithWaitBuckets([]float64{1, 1})} {
		if _, err := promlimit.New(opt); !errors.Is(err, promlimit.ErrInvalidOption) {
			t.Errorf("New with empty or non-increasing buckets = %v, want ErrInvalidOption", err)
		}
	}
}

// Observing a decision of known labels allocates nothing.
func TestObserveDecisionAllocatesNothing(t *testing.T) {
	obs, err := promlimit.New()
	if err != nil {
		t.Fatal(err)
	}
	o := &core.Observation{Limiter: "api", Policy: "per-second", Operation: core.OpTake, Outcome: core.OutcomeAllowed,
		Cost: 1, Latency: time.Millisecond}
	obs.ObserveDecision(context.Background(), o)
	if n := testing.AllocsPerRun(1000, func() { obs.ObserveDecision(context.Background(), o) }); n != 0 {
		t.Errorf("ObserveDecision allocates %v times per call, want 0", n)
	}
}

func BenchmarkAllowObserved(b *testing.B) {
	obs, err := promlimit.New()
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
