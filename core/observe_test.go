package core_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// seen is an Observation copied out of the call, as an Observer must.
type seen struct {
	Limiter   string
	Operation core.Operation
	Outcome   core.Outcome
	Policy    string
	Key       string
	Cost      int64
	Allowed   bool
	Wait      time.Duration
	Latency   time.Duration
	Err       error
}

// recorder is an Observer that keeps copies of what it sees.
type recorder struct {
	mu        sync.Mutex
	decisions []seen
	events    []core.Event
}

func (r *recorder) ObserveDecision(_ context.Context, o *core.Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decisions = append(r.decisions, seen{o.Limiter, o.Operation, o.Outcome, o.Policy, o.Key, o.Cost,
		o.Decision.Allowed, o.Wait, o.Latency, o.Err})
}

func (r *recorder) ObserveEvent(_ context.Context, e *core.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, *e)
}

func (r *recorder) last(t *testing.T) seen {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.decisions) == 0 {
		t.Fatal("the observer saw no decision")
	}
	return r.decisions[len(r.decisions)-1]
}

func (r *recorder) eventsOf(kind core.EventKind) []core.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []core.Event
	for _, e := range r.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// Every operation of a Limiter reaches its observer once, with what an
// operator's metrics and traces are made of.
func TestObserverSeesEveryOperation(t *testing.T) {
	rec := &recorder{}
	clock := newManualClock(t0)
	lim := newLimiter(t, clock, core.PerSecond(2).Named("api"), core.WithName("search"), core.WithObserver(rec))
	ctx := context.Background()
	dry := core.ContextWithDryRun(ctx, true)
	steps := []struct {
		name string
		do   func() (core.Decision, error)
		want seen
	}{
		{"an admitted take is allowed", func() (core.Decision, error) { return lim.AllowN(ctx, "k", 2) },
			seen{Operation: core.OpTake, Outcome: core.OutcomeAllowed, Policy: "api", Key: "k", Cost: 2, Allowed: true}},
		{"a take over the quota is denied", func() (core.Decision, error) { return lim.Allow(ctx, "k") },
			seen{Operation: core.OpTake, Outcome: core.OutcomeDenied, Policy: "api", Key: "k", Cost: 1}},
		{"a denial in a dry run is dry-run denied", func() (core.Decision, error) { return lim.Allow(dry, "k") },
			seen{Operation: core.OpTake, Outcome: core.OutcomeDryRunDenied, Policy: "api", Key: "k", Cost: 1}},
		{"an admission in a dry run is allowed", func() (core.Decision, error) { return lim.Allow(dry, "other") },
			seen{Operation: core.OpTake, Outcome: core.OutcomeAllowed, Policy: "api", Key: "other", Cost: 1, Allowed: true}},
		{"a peek is a peek", func() (core.Decision, error) { return lim.PeekN(ctx, "k", 1) },
			seen{Operation: core.OpPeek, Outcome: core.OutcomeDenied, Policy: "api", Key: "k", Cost: 1}},
		{"a refund is a refund", func() (core.Decision, error) { return lim.Refund(ctx, "k", 1) },
			seen{Operation: core.OpRefund, Outcome: core.OutcomeAllowed, Policy: "api", Key: "k", Cost: 1, Allowed: true}},
		{"a charge is a charge", func() (core.Decision, error) { return lim.Charge(ctx, "k", 3) },
			seen{Operation: core.OpCharge, Outcome: core.OutcomeDenied, Policy: "api", Key: "k", Cost: 3}},
		{"a reset is a reset", func() (core.Decision, error) { return lim.Reset(ctx, "k") },
			seen{Operation: core.OpReset, Outcome: core.OutcomeAllowed, Policy: "api", Key: "k", Allowed: true}},
		{"a negative cost is invalid", func() (core.Decision, error) { return lim.AllowN(ctx, "k", -1) },
			seen{Operation: core.OpTake, Outcome: core.OutcomeInvalid, Policy: "api", Key: "k", Cost: -1}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			d, err := s.do()
			got := rec.last(t)
			if (err != nil) != (got.Err != nil) || (err != nil && !errors.Is(got.Err, err)) {
				t.Errorf("Observation.Err = %v, want the error returned, %v", got.Err, err)
			}
			if got.Allowed != d.Allowed {
				t.Errorf("Observation.Decision.Allowed = %v, want the Decision's, %v", got.Allowed, d.Allowed)
			}
			if err == nil && got.Latency <= 0 {
				t.Errorf("Observation.Latency = %v, want the store call's duration", got.Latency)
			}
			s.want.Limiter = "search"
			got.Err, got.Latency = nil, 0
			if got != s.want {
				t.Errorf("Observation = %+v, want %+v", got, s.want)
			}
		})
	}
	if n := len(rec.decisions); n != len(steps) {
		t.Errorf("the observer saw %d decisions for %d operations", n, len(steps))
	}
}

// A LeakyBucket's queueing delay is the observed wait.
func TestObserverSeesTheWait(t *testing.T) {
	rec := &recorder{}
	lim := newLimiter(t, newManualClock(t0), core.PerSecond(10).WithAlgorithm(core.LeakyBucket), core.WithObserver(rec))
	lim.Allow(context.Background(), "k")
	d, _ := lim.Allow(context.Background(), "k")
	if got := rec.last(t); got.Wait != 100*time.Millisecond || got.Wait != d.Delay {
		t.Errorf("Observation.Wait = %v, want the Decision's Delay, 100ms (%v)", got.Wait, d.Delay)
	}
}

// Failures are observed with the failure policy's outcome and the store's
// own error, even when the policy answered without one.
func TestObserverSeesFailures(t *testing.T) {
	cases := []struct {
		name   string
		policy core.FailurePolicy
		want   core.Outcome
	}{
		{"FailOpen admits: failed open", core.FailOpen, core.OutcomeFailedOpen},
		{"FailClosed returns an error: failed closed", core.FailClosed, core.OutcomeFailedClosed},
		{"a Fallback that admits: fallback allowed", core.Fallback(memstore.New(memstore.WithSweepInterval(0))), core.OutcomeFallbackAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			s := &flakyStore{}
			s.fail(errDown)
			lim, _ := newPolicyLimiter(t, s, core.WithFailurePolicy(c.policy), core.WithObserver(rec),
				core.WithBreaker(core.Breaker{Disabled: true}), core.WithLogger(discard()))
			lim.Allow(context.Background(), "k")
			got := rec.last(t)
			if got.Outcome != c.want || !errors.Is(got.Err, errDown) || got.Latency <= 0 {
				t.Errorf("Observation = %+v; want outcome %v, the store's error and the call's latency", got, c.want)
			}
		})
	}
	t.Run("a Fallback that denies: fallback denied", func(t *testing.T) {
		rec := &recorder{}
		s := &flakyStore{}
		s.fail(errDown)
		lim, _ := newPolicyLimiter(t, s, core.WithFailurePolicy(core.Fallback(memstore.New(memstore.WithSweepInterval(0)))),
			core.WithObserver(rec), core.WithLogger(discard()))
		lim.AllowN(context.Background(), "k", 10)
		lim.Allow(context.Background(), "k")
		if got := rec.last(t); got.Outcome != core.OutcomeFallbackDenied {
			t.Errorf("Observation.Outcome = %v, want fallback_denied", got.Outcome)
		}
	})
	t.Run("a call skipped by the open breaker has no latency", func(t *testing.T) {
		rec := &recorder{}
		s := &flakyStore{}
		s.fail(refusedErr)
		lim, _ := newPolicyLimiter(t, s, core.WithObserver(rec), core.WithLogger(discard()),
			core.WithBreaker(core.Breaker{CoolDown: time.Hour}))
		lim.Allow(context.Background(), "k") // refused: opens the breaker
		lim.Allow(context.Background(), "k")
		got := rec.last(t)
		if got.Outcome != core.OutcomeFailedClosed || got.Latency != 0 || !errors.Is(got.Err, core.ErrUnavailable) {
			t.Errorf("Observation = %+v; want failed_closed, no latency, an error wrapping ErrUnavailable", got)
		}
	})
	t.Run("a closed store is an error", func(t *testing.T) {
		rec := &recorder{}
		store := memstore.New(memstore.WithSweepInterval(0))
		lim, err := core.New(store, core.PerSecond(1), core.WithObserver(rec))
		if err != nil {
			t.Fatal(err)
		}
		store.Close()
		lim.Allow(context.Background(), "k")
		if got := rec.last(t); got.Outcome != core.OutcomeError || !errors.Is(got.Err, core.ErrClosed) {
			t.Errorf("Observation = %+v; want outcome error and ErrClosed", got)
		}
	})
}

// Breaker transitions are events, per part, with the failure that opened
// the breaker.
func TestObserverSeesBreakerTransitions(t *testing.T) {
	const coolDown = 20 * time.Millisecond
	rec := &recorder{}
	s := &partedStore{}
	lim, _ := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithObserver(rec),
		core.WithLogger(discard()), core.WithBreaker(core.Breaker{CoolDown: coolDown}), core.WithName("api"))
	ctx := context.Background()
	lim.Allow(ctx, "a1") // refused: part A opens
	lim.Allow(ctx, "b1")
	ev := rec.eventsOf(core.EventBreaker)
	if len(ev) != 1 || ev[0].Part != "A" || ev[0].Limiter != "api" || ev[0].From != core.BreakerClosed ||
		ev[0].To != core.BreakerOpen || !errors.Is(ev[0].Err, refusedErr) {
		t.Fatalf("breaker events after a refusal on part A = %+v; want one: A closed → open, with the refusal", ev)
	}
	time.Sleep(coolDown)
	lim.Allow(ctx, "a1") // the probe fails
	ev = rec.eventsOf(core.EventBreaker)
	if len(ev) != 3 || ev[1].To != core.BreakerHalfOpen || ev[2].From != core.BreakerHalfOpen || ev[2].To != core.BreakerOpen {
		t.Errorf("breaker events after a failed probe = %+v; want open → half-open → open", ev)
	}
}

// Several observers each see everything, in the order given; a nil one is
// an error.
func TestSeveralObservers(t *testing.T) {
	var order []string
	var mu sync.Mutex
	mk := func(name string) core.Observer {
		return observerFunc(func(*core.Observation) { mu.Lock(); order = append(order, name); mu.Unlock() })
	}
	lim := newLimiter(t, newManualClock(t0), core.PerSecond(1), core.WithObserver(mk("first")), core.WithObserver(mk("second")))
	lim.Allow(context.Background(), "k")
	if len(order) != 2 || order[0] != "first" || order[1] != "second" {
		t.Errorf("observers called %v, want [first second]", order)
	}
	if _, err := core.New(memstore.New(), core.PerSecond(1), core.WithObserver(nil)); !errors.Is(err, core.ErrInvalidOption) {
		t.Errorf("New(WithObserver(nil)) = %v, want ErrInvalidOption", err)
	}
	if obs := core.JoinObservers(nil, nil); obs != nil {
		t.Errorf("JoinObservers(nil, nil) = %v, want nil", obs)
	}
}

type observerFunc func(*core.Observation)

func (f observerFunc) ObserveDecision(_ context.Context, o *core.Observation) { f(o) }
func (f observerFunc) ObserveEvent(context.Context, *core.Event)              {}

// The dry-run mark is a context value that only the caller sets.
func TestContextWithDryRun(t *testing.T) {
	ctx := context.Background()
	if core.IsDryRun(ctx) || core.IsDryRun(core.ContextWithDryRun(ctx, false)) {
		t.Error("IsDryRun of an unmarked context = true")
	}
	if core.ContextWithDryRun(ctx, false) != ctx {
		t.Error("ContextWithDryRun(ctx, false) made a new context, want ctx itself")
	}
	if !core.IsDryRun(core.ContextWithDryRun(ctx, true)) {
		t.Error("IsDryRun(ContextWithDryRun(ctx, true)) = false")
	}
}

// nopObserver counts, as a metrics observer would.
type nopObserver struct{ n atomic.Int64 }

func (o *nopObserver) ObserveDecision(_ context.Context, ob *core.Observation) { o.n.Add(ob.Cost) }
func (o *nopObserver) ObserveEvent(context.Context, *core.Event)               {}

// Observing a decision allocates nothing (under the race detector the pool
// drops items on purpose, so this runs without it).
func TestObservingAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	obs := &nopObserver{}
	for _, c := range []struct {
		name string
		opts []core.Option
	}{
		{"without an observer", nil},
		{"with an observer", []core.Option{core.WithObserver(obs)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := newLimiter(t, newManualClock(t0), append(c.opts, core.PerSecond(1_000_000))...)
			ctx := context.Background()
			lim.Allow(ctx, "k")
			if n := testing.AllocsPerRun(1000, func() { lim.Allow(ctx, "k") }); n != 0 {
				t.Errorf("Allow allocates %v times per call, want 0", n)
			}
		})
	}
}

func BenchmarkAllowObserved(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []core.Option
	}{
		{"none", nil},
		{"observer", []core.Option{core.WithObserver(&nopObserver{})}},
	} {
		b.Run(c.name, func(b *testing.B) {
			store := memstore.New(memstore.WithSweepInterval(0))
			defer store.Close()
			lim, err := core.New(store, append(c.opts, core.PerSecond(1_000_000_000))...)
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
		})
	}
}
