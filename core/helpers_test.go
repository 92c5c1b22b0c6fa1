package core_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// t0 is the fixed instant the step tables start from: 2023-11-15T00:00:00Z,
// a day boundary of the Unix epoch, so also an hour, minute and second
// boundary. Epoch-aligned windows of any of those lengths start at t0.
var t0 = time.Unix(1_700_006_400, 0)

// t0us is t0 in Unix microseconds, the unit core.Step takes.
const t0us int64 = 1_700_006_400_000_000

// at returns t0 + d in Unix microseconds.
func at(d time.Duration) int64 { return t0us + d.Microseconds() }

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
func apply(ctx context.Context, lim *core.Limiter, kind core.Kind, key string, cost int64) (core.Decision, error) {
	switch kind {
	case core.Take:
		return lim.AllowN(ctx, key, cost)
	case core.Peek:
		return lim.PeekN(ctx, key, cost)
	case core.Charge:
		return lim.Charge(ctx, key, cost)
	case core.Refund:
		return lim.Refund(ctx, key, cost)
	case core.Reset:
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
	kind core.Kind
	cost int64
	want result
}

func (r row) call() string {
	return fmt.Sprintf("%s(t0+%v, %d)", opName(r.kind), r.at, r.cost)
}

func opName(k core.Kind) string {
	switch k {
	case core.Take:
		return "AllowN"
	case core.Peek:
		return "PeekN"
	case core.Charge:
		return "Charge"
	case core.Refund:
		return "Refund"
	case core.Reset:
		return "Reset"
	}
	return k.String()
}

// runTable runs rows on limit l twice: through core.Step on a []core.State,
// and through a Limiter on the memory store with a manual clock. Both must
// give every row's decision.
func runTable(t *testing.T, l core.Limit, rows []row) {
	t.Helper()
	if err := l.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	t.Run("step", func(t *testing.T) {
		states := make([]core.State, 1)
		for _, r := range rows {
			t.Run(r.name, func(t *testing.T) {
				op := core.Op{Kind: r.kind, Key: "k", Limits: []core.Limit{l}, Cost: r.cost}
				d, keep, err := core.Step(&op, at(r.at), states)
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
func cloneStates(states []core.State) []core.State {
	c := make([]core.State, len(states))
	for i, s := range states {
		c[i] = s
		c[i].Log = append([]core.Mark(nil), s.Log...)
	}
	return c
}

// mustStep is core.Step on one limit that fails the test on error.
func mustStep(t *testing.T, l core.Limit, kind core.Kind, now, cost int64, states []core.State) core.Decision {
	t.Helper()
	op := core.Op{Kind: kind, Key: "k", Limits: []core.Limit{l}, Cost: cost}
	d, _, err := core.Step(&op, now, states)
	if err != nil {
		t.Fatalf("Step(%v, %v, %d): %v", l, kind, cost, err)
	}
	return d
}
