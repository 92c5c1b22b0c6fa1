package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
)

// t0 is the fixed instant the step tables start from: 2023-11-15T00:00:00Z,
// a day boundary of the Unix epoch, so also an hour, minute and second
// boundary. Epoch-aligned windows of any of those lengths start at t0.
var t0 = time.Unix(1_700_006_400, 0)

// t0us is t0 in Unix microseconds, the unit engine.Step takes.
const t0us int64 = 1_700_006_400_000_000

// at returns t0 + d in Unix microseconds.
func at(d time.Duration) int64 { return t0us + d.Microseconds() }

// compile compiles a core.Limit as a core.Limiter does.
func compile(l core.Limit) (engine.Limit, error) {
	return engine.Compile(engine.Spec{Name: l.Name, Algorithm: engine.Algorithm(l.Algorithm), Quota: l.Quota,
		Period: l.Period, Burst: l.Burst, Precision: l.Precision})
}

// op is an operation written with core.Limits, the way the tables read:
// step compiles it into an engine.Op.
type op struct {
	Kind   engine.Kind
	Scope  string
	Key    string
	Limits []core.Limit
	Cost   int64
	Lease  int64
}

// engineOp compiles o.
func (o *op) engineOp() (engine.Op, error) {
	cl := make([]engine.Limit, len(o.Limits))
	for i, l := range o.Limits {
		c, err := compile(l)
		if err != nil {
			return engine.Op{}, err
		}
		cl[i] = c
	}
	e := engine.Op{Kind: o.Kind, Key: o.Key, Cost: o.Cost, Lease: o.Lease}
	if len(cl) > 0 {
		p, err := engine.NewPlan(o.Scope, cl)
		if err != nil {
			return engine.Op{}, err
		}
		e.Plan = p
	}
	return e, nil
}

// step runs engine.Step on o at now and returns the Decision a core.Limiter
// would build from the Result, and keep as a Duration.
func step(o *op, now int64, states []engine.State) (core.Decision, time.Duration, error) {
	e, err := o.engineOp()
	if err != nil {
		return core.Decision{}, 0, err
	}
	var res engine.Result
	keep, err := engine.Step(&e, now, states, &res)
	if err != nil {
		return core.Decision{}, 0, err
	}
	return decisionOf(o.Limits, o.Cost, &res), micros(keep), nil
}

// decisionOf builds the Decision of res, as core.Limiter does.
func decisionOf(limits []core.Limit, cost int64, res *engine.Result) core.Decision {
	d := core.Decision{Allowed: res.Allowed, Cost: cost, Limit: limits[res.Binding], Remaining: res.Remaining,
		ResetAfter: micros(res.Reset), EffectiveWindow: micros(res.Window), Lease: res.Lease}
	if res.Allowed {
		d.Delay = micros(res.Delay)
	} else {
		d.RetryAfter = micros(res.Retry)
	}
	if res.Limits != nil {
		d.States = make([]core.LimitState, len(res.Limits))
		for i, r := range res.Limits {
			d.States[i] = core.LimitState{Limit: limits[i], Allowed: r.Allowed, Remaining: r.Remaining,
				ResetAfter: micros(r.Reset), Delay: micros(r.Delay), EffectiveWindow: micros(r.Window)}
			if !r.Allowed {
				d.States[i].RetryAfter = micros(r.Retry)
			}
		}
	}
	return d
}

func micros(us int64) time.Duration {
	if us < 0 || us > int64(core.Never/time.Microsecond) {
		return core.Never
	}
	return time.Duration(us) * time.Microsecond
}

// manualClock is a core.Clock that only moves when told to.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock(t time.Time) *manualClock { return &manualClock{now: t} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, forward or back.
func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// newLimiter returns a Limiter over a fresh memstore (without its background
// sweeper) whose time is clock.
func newLimiter(t *testing.T, clock core.Clock, opts ...core.Option) *core.Limiter {
	t.Helper()
	store := memstore.New(memstore.WithSweepInterval(0))
	t.Cleanup(func() { store.Close() })
	lim, err := core.New(store, append(opts, core.WithClock(clock))...)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	return lim
}

// apply runs an operation of kind through the Limiter's methods.
func apply(ctx context.Context, lim *core.Limiter, kind engine.Kind, key string, cost int64) (core.Decision, error) {
	switch kind {
	case engine.Take:
		return lim.AllowN(ctx, key, cost)
	case engine.Peek:
		return lim.PeekN(ctx, key, cost)
	case engine.Charge:
		return lim.Charge(ctx, key, cost)
	case engine.Refund:
		return lim.Refund(ctx, key, cost)
	case engine.Reset:
		return lim.Reset(ctx, key)
	}
	return core.Decision{}, fmt.Errorf("apply: unknown kind %v", kind)
}

// result is the part of a Decision (or LimitState) that step tables check.
type result struct {
	Allowed    bool
	Remaining  int64
	ResetAfter time.Duration
	RetryAfter time.Duration
	Delay      time.Duration
}

func (r result) String() string {
	retry := r.RetryAfter.String()
	if r.RetryAfter == core.Never {
		retry = "Never"
	}
	s := fmt.Sprintf("{Allowed:%v Remaining:%d ResetAfter:%v RetryAfter:%s", r.Allowed, r.Remaining, r.ResetAfter, retry)
	if r.Delay != 0 {
		s += fmt.Sprintf(" Delay:%v", r.Delay)
	}
	return s + "}"
}

func resultOf(d core.Decision) result {
	return result{Allowed: d.Allowed, Remaining: d.Remaining, ResetAfter: d.ResetAfter, RetryAfter: d.RetryAfter, Delay: d.Delay}
}

func stateResult(s core.LimitState) result {
	return result{Allowed: s.Allowed, Remaining: s.Remaining, ResetAfter: s.ResetAfter, RetryAfter: s.RetryAfter, Delay: s.Delay}
}

// Shorthands for the wanted results of step tables.

// ok is an allowed operation leaving rem units, fully replenished after reset.
func ok(rem int64, reset time.Duration) result {
	return result{Allowed: true, Remaining: rem, ResetAfter: reset}
}

// queued is an allowed LeakyBucket operation served after delay.
func queued(rem int64, reset, delay time.Duration) result {
	return result{Allowed: true, Remaining: rem, ResetAfter: reset, Delay: delay}
}

// denied is a denied operation that could pass after retry.
func denied(rem int64, reset, retry time.Duration) result {
	return result{Remaining: rem, ResetAfter: reset, RetryAfter: retry}
}

// row is one operation of a step table over one limit and the decision it
// must produce. Rows run in order on one key.
type row struct {
	name string        // what happens, as a sentence
	at   time.Duration // since t0
	kind engine.Kind
	cost int64
	want result
}

func (r row) call() string {
	return fmt.Sprintf("%s(t0+%v, %d)", opName(r.kind), r.at, r.cost)
}

func opName(k engine.Kind) string {
	switch k {
	case engine.Take:
		return "AllowN"
	case engine.Peek:
		return "PeekN"
	case engine.Charge:
		return "Charge"
	case engine.Refund:
		return "Refund"
	case engine.Reset:
		return "Reset"
	}
	return k.String()
}

// runTable runs rows on limit l twice: through core.Step on a []engine.State,
// and through a Limiter on the memory store with a manual clock. Both must
// give every row's decision.
func runTable(t *testing.T, l core.Limit, rows []row) {
	t.Helper()
	if err := l.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	t.Run("step", func(t *testing.T) {
		states := make([]engine.State, 1)
		for _, r := range rows {
			t.Run(r.name, func(t *testing.T) {
				op := op{Kind: r.kind, Key: "k", Limits: []core.Limit{l}, Cost: r.cost}
				d, keep, err := step(&op, at(r.at), states)
				if err != nil {
					t.Fatalf("%s: unexpected error %v", r.call(), err)
				}
				if got := resultOf(d); got != r.want {
					t.Errorf("%s = %v, want %v", r.call(), got, r.want)
				}
				if keep != d.ResetAfter {
					t.Errorf("%s: keep = %v, want ResetAfter %v", r.call(), keep, d.ResetAfter)
				}
				if d.Cost != r.cost || d.Limit != l || d.States != nil {
					t.Errorf("%s: Cost, Limit, States = %d, %v, %v; want %d, %v, nil", r.call(), d.Cost, d.Limit, d.States, r.cost, l)
				}
			})
		}
	})
	t.Run("limiter", func(t *testing.T) {
		clock := newManualClock(t0)
		lim := newLimiter(t, clock, l)
		ctx := context.Background()
		for _, r := range rows {
			t.Run(r.name, func(t *testing.T) {
				clock.Set(t0.Add(r.at))
				d, err := apply(ctx, lim, r.kind, "k", r.cost)
				if err != nil {
					t.Fatalf("%s: unexpected error %v", r.call(), err)
				}
				if got := resultOf(d); got != r.want {
					t.Errorf("%s = %v, want %v", r.call(), got, r.want)
				}
				if d.Limit.PolicyName() != l.PolicyName() {
					t.Errorf("%s: Limit.Name = %q, want %q", r.call(), d.Limit.Name, l.PolicyName())
				}
			})
		}
	})
}

// cloneStates returns a deep copy of states, logs included.
func cloneStates(states []engine.State) []engine.State {
	c := make([]engine.State, len(states))
	for i, s := range states {
		c[i] = s
		c[i].Log = append([]engine.Mark(nil), s.Log...)
	}
	return c
}

// mustStep is core.Step on one limit that fails the test on error.
func mustStep(t *testing.T, l core.Limit, kind engine.Kind, now, cost int64, states []engine.State) core.Decision {
	t.Helper()
	op := op{Kind: kind, Key: "k", Limits: []core.Limit{l}, Cost: cost}
	d, _, err := step(&op, now, states)
	if err != nil {
		t.Fatalf("Step(%v, %v, %d): %v", l, kind, cost, err)
	}
	return d
}
