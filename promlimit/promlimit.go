package promlimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/core"
)

// ErrInvalidOption reports an option of New that cannot be used.
var ErrInvalidOption = errors.New("promlimit: invalid option")

// DefaultLatencyBuckets are the default buckets of
// tollgate_store_duration_seconds, in seconds: 50µs to 1s, for a memory
// store (microseconds) and a Redis store (about a millisecond, up to the
// Limiter's timeout, 100ms by default).
var DefaultLatencyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// DefaultWaitBuckets are the default buckets of tollgate_wait_seconds, in
// seconds: 1ms to 10s.
var DefaultWaitBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// An Option configures an Observer.
type Option func(*config)

type config struct {
	latency, wait []float64
	err           error
}

// WithLatencyBuckets sets the buckets of tollgate_store_duration_seconds,
// in seconds, increasing. Default: DefaultLatencyBuckets.
func WithLatencyBuckets(b []float64) Option {
	return func(c *config) { c.latency = b; c.check("WithLatencyBuckets", b) }
}

// WithWaitBuckets sets the buckets of tollgate_wait_seconds, in seconds,
// increasing. Default: DefaultWaitBuckets.
func WithWaitBuckets(b []float64) Option {
	return func(c *config) { c.wait = b; c.check("WithWaitBuckets", b) }
}

func (c *config) check(name string, b []float64) {
	if len(b) == 0 {
		c.err = fmt.Errorf("%w: %s: no bucket", ErrInvalidOption, name)
	}
	for i := 1; i < len(b); i++ {
		if !(b[i] > b[i-1]) {
			c.err = fmt.Errorf("%w: %s(%v): buckets must increase", ErrInvalidOption, name, b)
			return
		}
	}
}

// An Observer is a core.Observer that keeps Tollgate's metrics, and a
// prometheus.Collector that exports them: register it with a registry
// (reg.MustRegister(obs)) and give it to Limiters (core.WithObserver) and
// stores (memstore.WithObserver, redisstore.WithObserver). One Observer
// serves any number of them, which its labels tell apart. It is safe for
// concurrent use.
type Observer struct {
	decisions, cost     *prometheus.CounterVec
	storeDuration, wait *prometheus.HistogramVec
	breakerState        *prometheus.GaugeVec
	breakerTransitions  *prometheus.CounterVec
	keys                *prometheus.GaugeVec
	evictions           *prometheus.CounterVec
	storeFailures       *prometheus.CounterVec
	scriptLoads         *prometheus.CounterVec
	compensations       *prometheus.CounterVec
	redirects           *prometheus.CounterVec
	topologyReloads     *prometheus.CounterVec
	adaptiveLimit       *prometheus.GaugeVec
	adaptiveInFlight    *prometheus.GaugeVec
	adaptiveLatency     *prometheus.GaugeVec
	adaptiveShed        *prometheus.CounterVec
	all                 []prometheus.Collector

	// The metrics of each label combination seen, so that a decision of a
	// known combination allocates nothing: a map copied on write (the
	// combinations are few and stable), at most maxChildren of them.
	children atomic.Pointer[map[childKey]*child]
	mu       sync.Mutex
}

// maxChildren bounds the label combinations whose metrics are kept at
// hand; past it, a decision looks its metrics up in the vectors, which
// allocates.
const maxChildren = 4096

type childKey struct {
	limiter, policy string
	op              core.Operation
	outcome         core.Outcome
}

type child struct {
	decisions, cost prometheus.Counter
	latency         prometheus.Observer
	wait            atomic.Pointer[prometheus.Observer] // made at the first wait: most limits never wait
	limiter, policy string
	metrics         *prometheus.HistogramVec // to make wait
}

// New returns an Observer whose metrics are not yet registered; it
// returns an error wrapping ErrInvalidOption for buckets that are empty or
// do not increase.
func New(opts ...Option) (*Observer, error) {
	c := config{latency: DefaultLatencyBuckets, wait: DefaultWaitBuckets}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tollgate", Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "tollgate", Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "tollgate", Name: name, Help: help,
			Buckets: append([]float64(nil), buckets...)}, labels)
	}
	o := &Observer{
		decisions: counter("decisions_total",
			"Operations of Tollgate limiters, by limiter, binding policy, operation (take, peek, charge, refund, reset) and outcome.",
			"limiter", "policy", "operation", "outcome"),
		cost: counter("cost_total",
			"Cost units the operations of Tollgate limiters asked for, by limiter, binding policy, operation and outcome.",
			"limiter", "policy", "operation", "outcome"),
		storeDuration: histogram("store_duration_seconds",
			"Time a Tollgate limiter's call to its store took, failed calls included.",
			c.latency, "limiter", "operation"),
		wait: histogram("wait_seconds",
			"Queueing delay of requests a LeakyBucket limit admitted after a wait.",
			c.wait, "limiter", "policy"),
		breakerState: gauge("breaker_state",
			"State of a Tollgate limiter's circuit breaker per store part: 1 for the current state (closed, open, half-open), 0 for the others; from its first transition.",
			"limiter", "part", "state"),
		breakerTransitions: counter("breaker_transitions_total",
			"Transitions of Tollgate limiters' circuit breakers, by the state entered.",
			"limiter", "part", "to"),
		keys: gauge("keys",
			"Keys held by a Tollgate store (memstore), as of its last report.",
			"store"),
		evictions: counter("evictions_total",
			"Keys a Tollgate store evicted to make room; lossy=\"true\" for keys that still had usage.",
			"store", "lossy"),
		storeFailures: counter("store_failures_total",
			"Failures a Tollgate store saw that no caller did: failed dials, calls that failed after their caller gave up.",
			"store"),
		scriptLoads: counter("store_script_loads_total",
			"Times a Tollgate Redis store loaded its script after the server lost it.",
			"store"),
		compensations: counter("store_compensations_total",
			"Operations a Tollgate Redis store undid because their caller gave up; result=\"failed\" when the undo failed.",
			"store", "result"),
		redirects: counter("store_redirects_total",
			"Operations a Tollgate Redis store sent again after a Cluster node refused them unrun.",
			"store"),
		topologyReloads: counter("store_topology_reloads_total",
			"Times a Tollgate Redis store had the Cluster client reload the cluster's topology.",
			"store"),
		adaptiveLimit: gauge("adaptive_limit",
			"The limit of a Tollgate adaptive concurrency limit (critical requests), as of its last window.",
			"limiter"),
		adaptiveInFlight: gauge("adaptive_in_flight",
			"Requests in flight under a Tollgate adaptive concurrency limit, as of its last window.",
			"limiter"),
		adaptiveLatency: gauge("adaptive_latency_seconds",
			"The no-load latency estimate of a Tollgate adaptive concurrency limit.",
			"limiter"),
		adaptiveShed: counter("adaptive_shed_total",
			"Requests a Tollgate adaptive concurrency limit shed (answered 503).",
			"limiter"),
	}
	o.all = []prometheus.Collector{o.decisions, o.cost, o.storeDuration, o.wait, o.breakerState,
		o.breakerTransitions, o.keys, o.evictions, o.storeFailures, o.scriptLoads, o.compensations,
		o.redirects, o.topologyReloads, o.adaptiveLimit, o.adaptiveInFlight, o.adaptiveLatency, o.adaptiveShed}
	m := make(map[childKey]*child)
	o.children.Store(&m)
	return o, nil
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.all {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.all {
		c.Collect(ch)
	}
}

// ObserveDecision implements core.Observer: it counts the decision and
// its cost, and records the store call's latency and a LeakyBucket wait.
func (o *Observer) ObserveDecision(_ context.Context, ob *core.Observation) {
	c := o.child(childKey{ob.Limiter, ob.Policy, ob.Operation, ob.Outcome})
	c.decisions.Inc()
	if ob.Cost > 0 {
		c.cost.Add(float64(ob.Cost))
	}
	if ob.Latency > 0 {
		c.latency.Observe(ob.Latency.Seconds())
	}
	if ob.Wait > 0 {
		w := c.wait.Load()
		if w == nil {
			obs := c.metrics.WithLabelValues(c.limiter, c.policy)
			w = &obs
			c.wait.Store(w)
		}
		(*w).Observe(ob.Wait.Seconds())
	}
}

// child returns the metrics of k's labels.
func (o *Observer) child(k childKey) *child {
	if c, ok := (*o.children.Load())[k]; ok {
		return c
	}
	op, outcome := k.op.String(), k.outcome.String()
	c := &child{
		decisions: o.decisions.WithLabelValues(k.limiter, k.policy, op, outcome),
		cost:      o.cost.WithLabelValues(k.limiter, k.policy, op, outcome),
		latency:   o.storeDuration.WithLabelValues(k.limiter, op),
		limiter:   k.limiter,
		policy:    k.policy,
		metrics:   o.wait,
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.children.Load()
	if have, ok := old[k]; ok {
		return have
	}
	if len(old) >= maxChildren {
		return c
	}
	m := make(map[childKey]*child, len(old)+1)
	for key, v := range old {
		m[key] = v
	}
	m[k] = c
	o.children.Store(&m)
	return c
}

var breakerStates = [...]core.BreakerState{core.BreakerClosed, core.BreakerOpen, core.BreakerHalfOpen}

// ObserveEvent implements core.Observer: breaker transitions, a store's
// keys and evictions, and a Redis store's events.
func (o *Observer) ObserveEvent(_ context.Context, e *core.Event) {
	n := float64(max(e.Count, 1))
	switch e.Kind {
	case core.EventBreaker:
		for _, s := range breakerStates {
			v := 0.0
			if s == e.To {
				v = 1
			}
			o.breakerState.WithLabelValues(e.Limiter, e.Part, s.String()).Set(v)
		}
		o.breakerTransitions.WithLabelValues(e.Limiter, e.Part, e.To.String()).Inc()
	case core.EventKeys:
		o.keys.WithLabelValues(e.Store).Set(float64(e.Keys))
	case core.EventEviction:
		lossy := "false"
		if e.Lossy {
			lossy = "true"
		}
		o.evictions.WithLabelValues(e.Store, lossy).Add(n)
	case core.EventStoreFailure:
		o.storeFailures.WithLabelValues(e.Store).Add(n)
	case core.EventScriptLoad:
		o.scriptLoads.WithLabelValues(e.Store).Add(n)
	case core.EventCompensation:
		result := "undone"
		if e.Err != nil {
			result = "failed"
		}
		o.compensations.WithLabelValues(e.Store, result).Add(n)
	case core.EventRedirect:
		o.redirects.WithLabelValues(e.Store).Add(n)
	case core.EventTopologyReload:
		o.topologyReloads.WithLabelValues(e.Store).Add(n)
	case core.EventAdaptive:
		o.adaptiveLimit.WithLabelValues(e.Limiter).Set(float64(e.Limit))
		o.adaptiveInFlight.WithLabelValues(e.Limiter).Set(float64(e.InFlight))
		o.adaptiveLatency.WithLabelValues(e.Limiter).Set(e.Latency.Seconds())
		o.adaptiveShed.WithLabelValues(e.Limiter).Add(float64(e.Count))
	}
}

var (
	_ core.Observer        = (*Observer)(nil)
	_ prometheus.Collector = (*Observer)(nil)
)
