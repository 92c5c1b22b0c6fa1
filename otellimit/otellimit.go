package otellimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/core"
)

// ScopeName is the instrumentation scope of the Observer's meter.
const ScopeName = "github.com/tollgate/tollgate/otellimit"

// ErrInvalidOption reports an option of New that cannot be used.
var ErrInvalidOption = errors.New("otellimit: invalid option")

// Attribute keys, in the semantic conventions' style.
const (
	AttrLimiter    = attribute.Key("ratelimit.limiter")     // a Limiter's name (core.WithName)
	AttrPolicy     = attribute.Key("ratelimit.policy")      // the binding limit's name
	AttrOperation  = attribute.Key("ratelimit.operation")   // take, peek, charge, refund, reset
	AttrOutcome    = attribute.Key("ratelimit.outcome")     // core.Outcome's name
	AttrCost       = attribute.Key("ratelimit.cost")        // span only: the cost asked for
	AttrRemaining  = attribute.Key("ratelimit.remaining")   // span only: units left under the policy
	AttrRetryAfter = attribute.Key("ratelimit.retry_after") // span only, denied: seconds until the cost could pass
	AttrWait       = attribute.Key("ratelimit.wait")        // span only, LeakyBucket: seconds of queueing
	AttrKey        = attribute.Key("ratelimit.key")         // span only, with WithKey(true): the key
	AttrStore      = attribute.Key("ratelimit.store")       // a store's name (Event.Store)
	AttrPart       = attribute.Key("ratelimit.part")        // a store's part: a Redis Cluster master
	AttrState      = attribute.Key("ratelimit.breaker.state")
	AttrFrom       = attribute.Key("ratelimit.breaker.from")
	AttrLossy      = attribute.Key("ratelimit.eviction.lossy")
	AttrResult     = attribute.Key("ratelimit.compensation.result") // undone, failed
)

// Span event names.
const (
	EventDecision = "ratelimit.decision"
	EventBreaker  = "ratelimit.breaker"
)

// An Option configures an Observer.
type Option func(*config)

type config struct {
	mp  metric.MeterProvider
	key bool
	err error
}

// WithMeterProvider sets the meter provider the instruments come from; it
// must not be nil. Default: otel.GetMeterProvider(), the global one, read
// at New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp == nil {
			c.err = fmt.Errorf("%w: WithMeterProvider(nil)", ErrInvalidOption)
		}
		c.mp = mp
	}
}

// WithKey(true) adds the key (ratelimit.key) to the span events of
// decisions. Keys are often personal (an IP address, a user, an API key):
// opt in only where traces may hold them. Metrics never carry the key.
// Default: false.
func WithKey(on bool) Option { return func(c *config) { c.key = on } }

// An Observer is a core.Observer that records Tollgate's metrics through
// the OpenTelemetry metric API and adds each decision to the span of the
// context it is made under (trace.SpanFromContext), when that span is
// recording. One Observer serves any number of Limiters and stores. It is
// safe for concurrent use.
type Observer struct {
	decisions, cost    metric.Int64Counter
	storeDuration      metric.Float64Histogram
	wait               metric.Float64Histogram
	breakerState       metric.Int64Gauge
	breakerTransitions metric.Int64Counter
	keys               metric.Int64Gauge
	evictions          metric.Int64Counter
	storeFailures      metric.Int64Counter
	scriptLoads        metric.Int64Counter
	compensations      metric.Int64Counter
	redirects          metric.Int64Counter
	topologyReloads    metric.Int64Counter
	adaptiveLimit      metric.Int64Gauge
	adaptiveInFlight   metric.Int64Gauge
	adaptiveLatency    metric.Float64Gauge
	adaptiveShed       metric.Int64Counter
	withKey            bool

	// The options of each label combination seen, so that a decision of a
	// known combination allocates nothing in this package: a map copied
	// on write, at most maxChildren entries.
	children atomic.Pointer[map[childKey]*child]
	mu       sync.Mutex
}

const maxChildren = 4096

type childKey struct {
	limiter, policy string
	op              core.Operation
	outcome         core.Outcome
}

type child struct {
	add     []metric.AddOption    // limiter, policy, operation, outcome
	latency []metric.RecordOption // limiter, operation
	wait    []metric.RecordOption // limiter, policy
}

// New returns an Observer whose instruments come from the meter provider
// (WithMeterProvider); it returns an error wrapping ErrInvalidOption for a
// nil provider, or the provider's error for an instrument.
func New(opts ...Option) (*Observer, error) {
	c := config{}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	m := c.mp.Meter(ScopeName)
	o := &Observer{withKey: c.key}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		i, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	gauge := func(name, unit, desc string) metric.Int64Gauge {
		i, err := m.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	histogram := func(name, desc string, bounds ...float64) metric.Float64Histogram {
		i, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return i
	}
	o.decisions = counter("tollgate.decisions", "{decision}", "Operations of Tollgate limiters.")
	o.cost = counter("tollgate.cost", "{unit}", "Cost units the operations of Tollgate limiters asked for.")
	o.storeDuration = histogram("tollgate.store.duration", "Time a Tollgate limiter's call to its store took, failed calls included.",
		.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1)
	o.wait = histogram("tollgate.wait.duration", "Queueing delay of requests a LeakyBucket limit admitted after a wait.",
		.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10)
	o.breakerState = gauge("tollgate.breaker.state", "1", "1 for a circuit breaker's current state, 0 for the others; from its first transition.")
	o.breakerTransitions = counter("tollgate.breaker.transitions", "{transition}", "Transitions of Tollgate limiters' circuit breakers.")
	o.keys = gauge("tollgate.store.keys", "{key}", "Keys held by a Tollgate store (memstore), as of its last report.")
	o.evictions = counter("tollgate.store.evictions", "{key}", "Keys a Tollgate store evicted to make room.")
	o.storeFailures = counter("tollgate.store.failures", "{failure}", "Failures a Tollgate store saw that no caller did: failed dials, calls that failed after their caller gave up.")
	o.scriptLoads = counter("tollgate.store.script_loads", "{load}", "Times a Tollgate Redis store loaded its script after the server lost it.")
	o.compensations = counter("tollgate.store.compensations", "{operation}", "Operations a Tollgate Redis store undid because their caller gave up.")
	o.redirects = counter("tollgate.store.redirects", "{operation}", "Operations a Tollgate Redis store sent again after a Cluster node refused them unrun.")
	o.topologyReloads = counter("tollgate.store.topology_reloads", "{reload}", "Times a Tollgate Redis store had the Cluster client reload the cluster's topology.")
	o.adaptiveLimit = gauge("tollgate.adaptive.limit", "{request}", "The limit of a Tollgate adaptive concurrency limit (critical requests), as of its last window.")
	o.adaptiveInFlight = gauge("tollgate.adaptive.in_flight", "{request}", "Requests in flight under a Tollgate adaptive concurrency limit, as of its last window.")
	lat, err := m.Float64Gauge("tollgate.adaptive.latency", metric.WithUnit("s"),
		metric.WithDescription("The no-load latency estimate of a Tollgate adaptive concurrency limit."))
	errs = append(errs, err)
	o.adaptiveLatency = lat
	o.adaptiveShed = counter("tollgate.adaptive.shed", "{request}", "Requests a Tollgate adaptive concurrency limit shed (answered 503).")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otellimit: New: %w", err)
	}
	children := make(map[childKey]*child)
	o.children.Store(&children)
	return o, nil
}

// ObserveDecision implements core.Observer: it counts the decision and
// its cost, records the store call's latency and a LeakyBucket wait, and
// adds an event ratelimit.decision to the context's span if it records.
func (o *Observer) ObserveDecision(ctx context.Context, ob *core.Observation) {
	c := o.child(childKey{ob.Limiter, ob.Policy, ob.Operation, ob.Outcome})
	o.decisions.Add(ctx, 1, c.add...)
	if ob.Cost > 0 {
		o.cost.Add(ctx, ob.Cost, c.add...)
	}
	if ob.Latency > 0 {
		o.storeDuration.Record(ctx, ob.Latency.Seconds(), c.latency...)
	}
	if ob.Wait > 0 {
		o.wait.Record(ctx, ob.Wait.Seconds(), c.wait...)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		o.spanEvent(span, ob)
	}
}

func (o *Observer) spanEvent(span trace.Span, ob *core.Observation) {
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, AttrLimiter.String(ob.Limiter), AttrPolicy.String(ob.Policy),
		AttrOperation.String(ob.Operation.String()), AttrOutcome.String(ob.Outcome.String()),
		AttrCost.Int64(ob.Cost))
	if ob.Err == nil || ob.Outcome == core.OutcomeFallbackAllowed || ob.Outcome == core.OutcomeFallbackDenied {
		attrs = append(attrs, AttrRemaining.Int64(ob.Decision.Remaining))
	}
	if d := ob.Decision.RetryAfter; d > 0 && d != core.Never {
		attrs = append(attrs, AttrRetryAfter.Float64(d.Seconds()))
	}
	if ob.Wait > 0 {
		attrs = append(attrs, AttrWait.Float64(ob.Wait.Seconds()))
	}
	if o.withKey {
		attrs = append(attrs, AttrKey.String(ob.Key))
	}
	span.AddEvent(EventDecision, trace.WithAttributes(attrs...))
}

// child returns the options of k's attributes.
func (o *Observer) child(k childKey) *child {
	if c, ok := (*o.children.Load())[k]; ok {
		return c
	}
	limiter, policy := AttrLimiter.String(k.limiter), AttrPolicy.String(k.policy)
	op, outcome := AttrOperation.String(k.op.String()), AttrOutcome.String(k.outcome.String())
	c := &child{
		add:     []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(limiter, policy, op, outcome))},
		latency: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(limiter, op))},
		wait:    []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(limiter, policy))},
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

// ObserveEvent implements core.Observer: breaker transitions (also a span
// event ratelimit.breaker on the context's span, if it records), a store's
// keys and evictions, and a Redis store's events.
func (o *Observer) ObserveEvent(ctx context.Context, e *core.Event) {
	n := max(e.Count, 1)
	store := metric.WithAttributes(AttrStore.String(e.Store))
	switch e.Kind {
	case core.EventBreaker:
		limiter, part := AttrLimiter.String(e.Limiter), AttrPart.String(e.Part)
		for _, s := range breakerStates {
			v := int64(0)
			if s == e.To {
				v = 1
			}
			o.breakerState.Record(ctx, v, metric.WithAttributes(limiter, part, AttrState.String(s.String())))
		}
		o.breakerTransitions.Add(ctx, 1, metric.WithAttributes(limiter, part, AttrState.String(e.To.String())))
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.AddEvent(EventBreaker, trace.WithAttributes(limiter, part,
				AttrFrom.String(e.From.String()), AttrState.String(e.To.String())))
		}
	case core.EventKeys:
		o.keys.Record(ctx, e.Keys, store)
	case core.EventEviction:
		o.evictions.Add(ctx, n, metric.WithAttributes(AttrStore.String(e.Store), AttrLossy.Bool(e.Lossy)))
	case core.EventStoreFailure:
		o.storeFailures.Add(ctx, n, store)
	case core.EventScriptLoad:
		o.scriptLoads.Add(ctx, n, store)
	case core.EventCompensation:
		result := "undone"
		if e.Err != nil {
			result = "failed"
		}
		o.compensations.Add(ctx, n, metric.WithAttributes(AttrStore.String(e.Store), AttrResult.String(result)))
	case core.EventRedirect:
		o.redirects.Add(ctx, n, store)
	case core.EventTopologyReload:
		o.topologyReloads.Add(ctx, n, store)
	case core.EventAdaptive:
		limiter := metric.WithAttributes(AttrLimiter.String(e.Limiter))
		o.adaptiveLimit.Record(ctx, e.Limit, limiter)
		o.adaptiveInFlight.Record(ctx, e.InFlight, limiter)
		o.adaptiveLatency.Record(ctx, e.Latency.Seconds(), limiter)
		if e.Count > 0 {
			o.adaptiveShed.Add(ctx, e.Count, limiter)
		}
	}
}

var _ core.Observer = (*Observer)(nil)
