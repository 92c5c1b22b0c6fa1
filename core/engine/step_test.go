package engine_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// everyAlgorithm returns l counted by each algorithm, named after it.
func everyAlgorithm(l core.Limit) map[string]core.Limit {
	m := make(map[string]core.Limit)
	for _, a := range core.Algorithms() {
		m[a.String()] = l.WithAlgorithm(a)
	}
	return m
}

func TestStepRejectsInvalidOperations(t *testing.T) {
	l := core.PerSecond(10)
	tests := []struct {
		name string
		op   op
		want error
	}{
		{"a negative cost is invalid", op{Key: "k", Limits: []core.Limit{l}, Cost: -1}, core.ErrInvalidCost},
		{"a negative cost is invalid for a refund too", op{Kind: engine.Refund, Key: "k", Limits: []core.Limit{l}, Cost: math.MinInt64}, core.ErrInvalidCost},
		{"an empty key is invalid", op{Key: "", Limits: []core.Limit{l}, Cost: 1}, core.ErrInvalidKey},
		{"an unknown kind is invalid", op{Kind: engine.Kind(9), Key: "k", Limits: []core.Limit{l}, Cost: 1}, core.ErrInvalidOp},
		{"an operation without limits is invalid", op{Key: "k", Cost: 1}, core.ErrInvalidOp},
		{"an invalid limit is invalid", op{Key: "k", Limits: []core.Limit{core.PerSecond(0)}, Cost: 1}, core.ErrInvalidLimit},
		{"an invalid second limit is invalid", op{Key: "k", Limits: []core.Limit{l, core.Per(1, 0)}, Cost: 1}, core.ErrInvalidLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			states := make([]engine.State, len(tt.op.Limits))
			// A state in use, which an invalid operation must leave alone.
			if len(states) > 0 && tt.op.Limits[0].Validate() == nil {
				mustStep(t, tt.op.Limits[0], engine.Take, t0us, 3, states[:1])
			}
			before := cloneStates(states)
			_, _, err := step(&tt.op, t0us+1, states)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Step(%+v) error = %v, want one wrapping %v", tt.op, err, tt.want)
			}
			if !reflect.DeepEqual(states, before) {
				t.Errorf("Step(%+v) changed the states on error: %+v, was %+v", tt.op, states, before)
			}
			e, err := tt.op.engineOp() // the plan rejects invalid limits
			if err == nil {
				err = e.Validate()
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Op.Validate() = %v, want an error wrapping %v", err, tt.want)
			}
		})
	}
}

// The Limiter reports the same errors: invalid input is an error, being
// limited is not.
func TestLimiterRejectsInvalidInput(t *testing.T) {
	lim := newLimiter(t, newManualClock(t0), core.PerSecond(10))
	ctx := context.Background()
	if _, err := lim.AllowN(ctx, "k", -1); !errors.Is(err, core.ErrInvalidCost) {
		t.Errorf("AllowN(k, -1) error = %v, want ErrInvalidCost", err)
	}
	if _, err := lim.Charge(ctx, "k", -5); !errors.Is(err, core.ErrInvalidCost) {
		t.Errorf("Charge(k, -5) error = %v, want ErrInvalidCost", err)
	}
	if _, err := lim.Allow(ctx, ""); !errors.Is(err, core.ErrInvalidKey) {
		t.Errorf("Allow(\"\") error = %v, want ErrInvalidKey", err)
	}
	if d, err := lim.AllowN(ctx, "k", 11); err != nil || d.Allowed || d.RetryAfter != core.Never {
		t.Errorf("AllowN(k, 11) = %v, %v; want denied with RetryAfter Never and no error", resultOf(d), err)
	}
}

// For every algorithm: a cost above the capacity is denied with
// RetryAfter Never and changes nothing; cost 0 passes while usage is within
// the quota; Peek never changes state.
func TestCostEdgesOnEveryAlgorithm(t *testing.T) {
	for name, l := range everyAlgorithm(core.PerSecond(4)) {
		t.Run(name, func(t *testing.T) {
			states := make([]engine.State, 1)
			now := at(250 * time.Millisecond)
			if d := mustStep(t, l, engine.Take, now, 0, states); !d.Allowed || d.Remaining != 4 || d.ResetAfter != 0 {
				t.Errorf("AllowN(%v, 0) on a fresh key = %v, want allowed, 4 remaining, nothing to reset", now, resultOf(d))
			}
			mustStep(t, l, engine.Take, now, 1, states)
			before := mustStep(t, l, engine.Peek, now, 0, cloneStates(states))
			for _, cost := range []int64{5, 1000, math.MaxInt64} {
				for _, kind := range []engine.Kind{engine.Take, engine.Peek} {
					d := mustStep(t, l, kind, now, cost, states)
					if d.Allowed || d.RetryAfter != core.Never || d.Delay != 0 {
						t.Errorf("%s(%v, %d) = %v, want denied with RetryAfter Never", opName(kind), now, cost, resultOf(d))
					}
					if d.Remaining != before.Remaining || d.ResetAfter != before.ResetAfter {
						t.Errorf("%s(%v, %d) = %v, want Remaining and ResetAfter of %v", opName(kind), now, cost, resultOf(d), resultOf(before))
					}
				}
			}
			for range 3 {
				if d := mustStep(t, l, engine.Peek, now, 3, states); !d.Allowed {
					t.Errorf("PeekN(%v, 3) = %v, want allowed (3 of 4 left)", now, resultOf(d))
				}
			}
			// Neither the denied takes nor the peeks took anything: 3 pass.
			if d := mustStep(t, l, engine.Take, now, 3, states); !d.Allowed || d.Remaining != 0 {
				t.Errorf("AllowN(%v, 3) = %v, want allowed with 0 remaining", now, resultOf(d))
			}
			if d := mustStep(t, l, engine.Take, now, 0, states); !d.Allowed {
				t.Errorf("AllowN(%v, 0) at exactly the quota = %v, want allowed", now, resultOf(d))
			}
			if d := mustStep(t, l, engine.Take, now, 1, states); d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Second {
				t.Errorf("AllowN(%v, 1) over the quota = %v, want denied for at most 1s", now, resultOf(d))
			}
			mustStep(t, l, engine.Charge, now, 1, states)
			d := mustStep(t, l, engine.Take, now, 0, states)
			if l.Algorithm == core.Concurrency { // counts units in flight: Charge leaves it alone
				if !d.Allowed || d.Remaining != 0 {
					t.Errorf("AllowN(%v, 0) after a charge = %v, want allowed with 0 remaining (a charge acquires nothing)", now, resultOf(d))
				}
			} else if d.Allowed || d.RetryAfter <= 0 {
				t.Errorf("AllowN(%v, 0) after a charge over the quota = %v, want denied", now, resultOf(d))
			}
		})
	}
}

// A clock that steps back never panics, never admits more than the
// quota, and never reports a negative or endless wait.
func TestClockSteppingBack(t *testing.T) {
	backs := []time.Duration{time.Microsecond, 300 * time.Millisecond, time.Second, 3 * time.Second, time.Hour, 24 * 365 * time.Hour}
	for name, l := range everyAlgorithm(core.PerSecond(5)) {
		t.Run(name, func(t *testing.T) {
			for _, back := range backs {
				states := make([]engine.State, 1)
				now := at(10*time.Second + 500*time.Millisecond)
				if d := mustStep(t, l, engine.Take, now, 5, states); !d.Allowed {
					t.Fatalf("AllowN(%v, 5) = %v, want allowed", now, resultOf(d))
				}
				then := now - back.Microseconds()
				for _, kind := range []engine.Kind{engine.Take, engine.Peek} {
					d := mustStep(t, l, kind, then, 1, states)
					if d.Allowed {
						t.Errorf("%s(now−%v, 1) after using the quota up = %v, want denied", opName(kind), back, resultOf(d))
					}
					if d.RetryAfter <= 0 || d.RetryAfter == core.Never || d.ResetAfter < 0 || d.Remaining != 0 {
						t.Errorf("%s(now−%v, 1) = %v, want a finite positive RetryAfter and nothing remaining", opName(kind), back, resultOf(d))
					}
				}
				// Back at the present time the quota is still used up, and
				// it is back in full two periods after it was used (the
				// sliding window weighs the previous window).
				if d := mustStep(t, l, engine.Take, now, 1, states); d.Allowed {
					t.Errorf("AllowN(now, 1) after stepping back %v = %v, want denied", back, resultOf(d))
				}
				if d := mustStep(t, l, engine.Take, now+2_000_000, 5, states); !d.Allowed {
					t.Errorf("AllowN(now+2s, 5) after stepping back %v = %v, want allowed", back, resultOf(d))
				}
			}
		})
	}
}

// A Charge and a Refund of the same cost at a clock that stepped back leave
// the usage as it was: when the clock is back, the quota is still used up.
// A Charge from a clock behind the one that wrote the state must not erase
// usage, and a Refund from it gives back exactly its cost. (Beyond
// DebtFactor periods of lag a Charge saturates: the debt already exceeds
// the cap as that clock sees it.)
func TestChargeAndRefundWithClockSteppedBack(t *testing.T) {
	backs := []time.Duration{time.Second, time.Minute, 2 * time.Minute, time.Hour}
	for name, l := range everyAlgorithm(core.PerSecond(5)) {
		t.Run(name, func(t *testing.T) {
			for _, back := range backs {
				states := make([]engine.State, 1)
				now := at(10 * time.Second)
				mustStep(t, l, engine.Take, now, 5, states)
				then := now - back.Microseconds()
				mustStep(t, l, engine.Charge, then, 1, states)
				if d := mustStep(t, l, engine.Peek, now, 1, states); d.Allowed {
					t.Errorf("PeekN(now, 1) after Charge(now−%v, 1) = %v, want denied: 5 of 5 were taken at now", back, resultOf(d))
				}
				mustStep(t, l, engine.Refund, then, 1, states)
				if l.Algorithm == core.GCRA || l.Algorithm == core.LeakyBucket || l.Algorithm == core.TokenBucket {
					// Continuously refilling: the refund gives back one unit.
					if d := mustStep(t, l, engine.Peek, now, 2, states); d.Allowed && back < time.Minute {
						t.Errorf("PeekN(now, 2) after Charge and Refund of 1 from now−%v = %v, want denied: only 1 unit can be free", back, resultOf(d))
					}
				}
			}
		})
	}
}

// A clock stepped back very far (a zeroed or broken clock) must not
// overflow Durations: the windowed algorithms' waits, counted to the
// stored window at t0, are longer than a Duration holds (292 years) and
// must saturate, not wrap. (GCRA and LeakyBucket cap their debt at
// DebtFactor × capacity, so their waits stay short.)
func TestClockSteppedBackCenturies(t *testing.T) {
	for name, l := range everyAlgorithm(core.PerSecond(5)) {
		t.Run(name, func(t *testing.T) {
			// 423 years back the waits wrap to negative Durations; 2023
			// years back, to wrong positive ones.
			for _, then := range []time.Time{time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)} {
				states := make([]engine.State, 1)
				mustStep(t, l, engine.Take, t0us, 5, states)
				d := mustStep(t, l, engine.Take, then.UnixMicro(), 1, states)
				if d.Allowed || d.RetryAfter <= 0 || d.ResetAfter < 0 {
					t.Errorf("AllowN(%v, 1) after using the quota at t0 = %v, want denied with a positive RetryAfter", then.Format(time.DateOnly), resultOf(d))
					continue
				}
				if l.Algorithm == core.GCRA || l.Algorithm == core.LeakyBucket {
					continue
				}
				if far := t0.Sub(then); d.RetryAfter < far || d.ResetAfter < far { // Sub saturates
					t.Errorf("AllowN(%v, 1) after using the quota at t0 = %v, want waits saturated at %v, not wrapped", then.Format(time.DateOnly), resultOf(d), far)
				}
			}
		})
	}
}

// Huge costs saturate: Charge(math.MaxInt64) caps usage at DebtFactor ×
// capacity, never overflows, and the wait it causes is finite. Q=10, P=1s.
func TestHugeCharge(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	tests := []struct {
		alg core.Algorithm
		// after Charge(MaxInt64) at t0, and after a Take of 1 then
		charged, take result
	}{
		// count 640: over until the window ends.
		{core.FixedWindow, denied(0, time.Second, time.Second), denied(0, time.Second, time.Second)},
		// cur=640; next window: 640·(1e6−e) ≤ 10e6 ⇔ e ≥ 1e6 − 15625;
		// for a cost of 1: 640·(1e6−e) ≤ 9e6 ⇔ e ≥ 1e6 − ⌊14062.5⌋.
		{core.SlidingWindow, denied(0, 2*time.Second, 1984375*us), denied(0, 2*time.Second, 1985938*us)},
		// One entry (t0, 640), live until t0+1s.
		{core.SlidingLog, denied(0, time.Second, time.Second), denied(0, time.Second, time.Second)},
		// Bucket 0 of 100ms, live until t0+1s.
		{core.BucketedWindow, denied(0, time.Second, time.Second), denied(0, time.Second, time.Second)},
		// tokens 10 − 640 = −630: 63s to 0, 64s to full, 63.1s to 1.
		{core.TokenBucket, denied(0, 64*time.Second, 63*time.Second), denied(0, 64*time.Second, 63100*ms)},
		{core.GCRA, denied(0, 64*time.Second, 63*time.Second), denied(0, 64*time.Second, 63100*ms)},
		{core.LeakyBucket, denied(0, 64*time.Second, 63*time.Second), denied(0, 64*time.Second, 63100*ms)},
	}
	for _, tt := range tests {
		t.Run(tt.alg.String(), func(t *testing.T) {
			l := core.PerSecond(10).WithAlgorithm(tt.alg)
			states := make([]engine.State, 1)
			for i := range 3 { // saturated: a second and third charge change nothing
				if got := resultOf(mustStep(t, l, engine.Charge, t0us, math.MaxInt64, states)); got != tt.charged {
					t.Errorf("Charge #%d(t0, MaxInt64) = %v, want %v", i+1, got, tt.charged)
				}
			}
			if got := resultOf(mustStep(t, l, engine.Take, t0us, 1, states)); got != tt.take {
				t.Errorf("AllowN(t0, 1) = %v, want %v", got, tt.take)
			}
			if got := resultOf(mustStep(t, l, engine.Take, t0us, math.MaxInt64, states)); got.Allowed || got.RetryAfter != core.Never {
				t.Errorf("AllowN(t0, MaxInt64) = %v, want denied with RetryAfter Never", got)
			}
			if got, want := resultOf(mustStep(t, l, engine.Refund, t0us, math.MaxInt64, states)), ok(10, 0); got != want {
				t.Errorf("Refund(t0, MaxInt64) = %v, want %v", got, want)
			}
		})
	}
}

// Refund(MaxInt64) must leave zero usage whatever was charged before.
// A SlidingWindow can carry DebtFactor × Quota in each of its two windows.
func TestHugeRefundAfterChargesInTwoWindows(t *testing.T) {
	for name, l := range everyAlgorithm(core.PerSecond(10)) {
		t.Run(name, func(t *testing.T) {
			states := make([]engine.State, 1)
			mustStep(t, l, engine.Charge, at(0), math.MaxInt64, states)
			mustStep(t, l, engine.Charge, at(1500*time.Millisecond), math.MaxInt64, states)
			d := mustStep(t, l, engine.Refund, at(1500*time.Millisecond), math.MaxInt64, states)
			if got, want := resultOf(d), ok(10, 0); got != want {
				t.Errorf("Refund(t0+1.5s, MaxInt64) after two Charge(MaxInt64) = %v, want %v", got, want)
			}
		})
	}
}

// Limits with huge quotas (wide: Capacity × Period past 2^47µs) decide
// exactly, to the µs, as small ones do.
func TestHugeQuotasAreExact(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	t.Run("a billion a day refills a token every 86.4µs", func(t *testing.T) {
		for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA} {
			l := core.PerDay(1_000_000_000).WithAlgorithm(alg)
			t.Run(alg.String(), func(t *testing.T) {
				runTable(t, l, []row{
					{"the whole day's quota passes at once", 0, engine.Take, 1_000_000_000, ok(0, 24*time.Hour)},
					{"the next token waits ⌈86.4µs⌉", 0, engine.Take, 1, denied(0, 24*time.Hour, 87*us)},
					{"86µs refill 0.995 tokens", 86 * us, engine.Take, 1, denied(0, 24*time.Hour-86*us, us)},
					{"87µs refill one", 87 * us, engine.Peek, 1, ok(1, 24*time.Hour-87*us)},
					// 1e6/86.4 = 11574.07… tokens.
					{"one second refills ⌊1e6/86.4⌋ tokens", time.Second, engine.Peek, 0, ok(11574, 24*time.Hour-time.Second)},
					// 11575·86.4µs = 1000080µs.
					{"a cost of 11575 waits 80µs", time.Second, engine.Take, 11575, denied(11574, 24*time.Hour-time.Second, 80*us)},
					{"and passes then, emptying the bucket", time.Second + 80*us, engine.Take, 11575, ok(0, 24*time.Hour)},
				})
			})
		}
	})
	t.Run("a million a day refills a token every 86.4ms", func(t *testing.T) {
		l := core.PerDay(1_000_000).WithAlgorithm(core.TokenBucket)
		runTable(t, l, []row{
			{"the whole day's quota passes at once", 0, engine.Take, 1_000_000, ok(0, 24*time.Hour)},
			{"the next token waits 86.4ms", 0, engine.Take, 1, denied(0, 24*time.Hour, 86400*us)},
			{"and has arrived then", 86400 * us, engine.Take, 1, ok(0, 24*time.Hour)},
		})
	})
	t.Run("ten million a day drained at any µs refills from then", func(t *testing.T) {
		for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA} {
			l := core.PerDay(10_000_000).WithAlgorithm(alg) // a token every 8.64ms
			t.Run(alg.String(), func(t *testing.T) {
				runTable(t, l, []row{
					{"the whole burst passes at 9999µs", 9999 * us, engine.Take, 10_000_000, ok(0, 24*time.Hour)},
					{"1µs later a token waits 8639µs", 10 * ms, engine.Take, 1, denied(0, 24*time.Hour-us, 8639*us)},
					{"8.64ms after the burst it passes", (9999 + 8640) * us, engine.Take, 1, ok(0, 24*time.Hour)},
				})
			})
		}
	})
	t.Run("MaxQuota a second refills 140737488.36 tokens a µs", func(t *testing.T) {
		for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA} {
			l := core.PerSecond(core.MaxQuota).WithAlgorithm(alg)
			t.Run(alg.String(), func(t *testing.T) {
				runTable(t, l, []row{
					{"the whole burst passes at 999999µs", 999_999 * us, engine.Take, core.MaxQuota, ok(0, time.Second)},
					{"1µs later the burst is not back", time.Second, engine.Take, core.MaxQuota, denied(140_737_488, time.Second-us, time.Second-us)},
					{"nor a token more than 1µs refills", time.Second, engine.Take, 140_737_489, denied(140_737_488, time.Second-us, us)},
					{"but what 1µs refills passes", time.Second, engine.Take, 140_737_488, ok(0, time.Second)},
				})
			})
		}
	})
	t.Run("MaxQuota a second saturated repays to the µs", func(t *testing.T) {
		for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA} {
			l := core.PerSecond(core.MaxQuota).WithAlgorithm(alg)
			t.Run(alg.String(), func(t *testing.T) {
				runTable(t, l, []row{
					// Usage saturates at 64 × capacity at 999999µs: back
					// under capacity 63s later, fully repaid 64s later.
					{"a huge charge saturates", 999_999 * us, engine.Charge, math.MaxInt64, denied(0, 64*time.Second, 63*time.Second)},
					// 1µs of refill since 63.999999s: 140737488.36 tokens.
					{"at 64s the debt is not repaid a µs early", 64 * time.Second, engine.Take, 140_737_489, denied(140_737_488, time.Second-us, us)},
					{"only to the µs", 64 * time.Second, engine.Take, 140_737_488, ok(0, time.Second)},
				})
			})
		}
	})
	t.Run("a billion a day on a sliding window", func(t *testing.T) {
		l := core.PerDay(1_000_000_000)
		runTable(t, l, []row{
			{"half a day's quota at noon", 12 * time.Hour, engine.Take, 500_000_000, ok(500_000_000, 36*time.Hour)},
			// Next day, e = 6h: 5e8·(86400−21600) = 3.24e13 ≤ (1e9−c)·86400
			// ⇔ c ≤ 625_000_000.
			{"next day at 6h the weighted cost 625M passes exactly", 30 * time.Hour, engine.Peek, 625_000_000, ok(625_000_000, 18*time.Hour)},
			// 5e8·(P−e') ≤ 374999999·P ⇔ P − e' ≤ 64799999827.2µs:
			// e' ≥ 21600000173µs.
			{"625M+1 waits 173µs", 30 * time.Hour, engine.Take, 625_000_001, denied(625_000_000, 18*time.Hour, 173*us)},
			{"and passes then", 30*time.Hour + 173*us, engine.Take, 625_000_001, ok(0, 42*time.Hour-173*us)},
		})
	})
	t.Run("a huge charge on a wide limit saturates", func(t *testing.T) {
		for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA, core.SlidingWindow} {
			l := core.PerDay(1_000_000_000).WithAlgorithm(alg)
			d := mustStep(t, l, engine.Charge, t0us, math.MaxInt64, make([]engine.State, 1))
			// Rated: 63e9 tokens of debt at 1e9 a day; sliding: the next day
			// at e ≥ 86400 − ⌊1e9·86400/64e9⌋ = 85050s.
			want := denied(0, 64*24*time.Hour, 63*24*time.Hour)
			if alg == core.SlidingWindow {
				want = denied(0, 48*time.Hour, (86400+85050)*time.Second)
			}
			if got := resultOf(d); got != want {
				t.Errorf("%v: Charge(t0, MaxInt64) = %v, want %v", alg, got, want)
			}
		}
	})
}

// A key's state outlives a change of its Quota or Burst (its usage is kept)
// but not of its Algorithm, Period or Precision (it starts afresh).
func TestStateAcrossLimitChanges(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		before core.Limit // takes 8 at t0
		after  core.Limit // then peeks 0 at t0+100ms
		want   result
	}{
		{"a fixed window lowered to 5 is over its quota", core.PerSecond(10).WithAlgorithm(core.FixedWindow), core.PerSecond(5).WithAlgorithm(core.FixedWindow), denied(0, 900*ms, 900*ms)},
		{"a fixed window raised to 20 keeps the 8", core.PerSecond(10).WithAlgorithm(core.FixedWindow), core.PerSecond(20).WithAlgorithm(core.FixedWindow), ok(12, 900*ms)},
		{"a sliding window raised to 20 keeps the 8", core.PerSecond(10), core.PerSecond(20), ok(12, 1900*ms)},
		{"a sliding log raised to 20 keeps the 8", core.PerSecond(10).WithAlgorithm(core.SlidingLog), core.PerSecond(20).WithAlgorithm(core.SlidingLog), ok(12, 900*ms)},
		// 2 tokens + 0.1s·10/s = 3 tokens, capped by the new burst of 2.
		{"a token bucket's tokens are capped by a lowered burst", core.PerSecond(10).WithAlgorithm(core.TokenBucket), core.PerSecond(10).WithBurst(2).WithAlgorithm(core.TokenBucket), ok(2, 0)},
		{"a token bucket's tokens survive a raised burst", core.PerSecond(10).WithAlgorithm(core.TokenBucket), core.PerSecond(10).WithBurst(20).WithAlgorithm(core.TokenBucket), ok(3, 1700*ms)},
		{"a new algorithm starts afresh", core.PerSecond(10).WithAlgorithm(core.FixedWindow), core.PerSecond(10), ok(10, 0)},
		{"a new period starts afresh", core.PerSecond(10).WithAlgorithm(core.FixedWindow), core.Per(10, 2*time.Second).WithAlgorithm(core.FixedWindow), ok(10, 0)},
		{"a new precision starts afresh", core.PerSecond(10).WithAlgorithm(core.BucketedWindow), core.PerSecond(10).WithAlgorithm(core.BucketedWindow).WithPrecision(500 * ms), ok(10, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			states := make([]engine.State, 1)
			mustStep(t, tt.before, engine.Take, t0us, 8, states)
			if got := resultOf(mustStep(t, tt.after, engine.Peek, at(100*ms), 0, states)); got != tt.want {
				t.Errorf("PeekN(t0+100ms, 0) under %v after AllowN(t0, 8) under %v = %v, want %v", tt.after, tt.before, got, tt.want)
			}
		})
	}
}
