package engine_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// multiStep runs kind on limits with engine.Step at t0+d and returns the
// Decision; it fails the test on error.
func multiStep(t *testing.T, limits []core.Limit, kind engine.Kind, d time.Duration, cost int64, states []engine.State) core.Decision {
	t.Helper()
	op := op{Kind: kind, Key: "k", Limits: limits, Cost: cost}
	dec, keep, err := step(&op, at(d), states)
	if err != nil {
		t.Fatalf("%s(t0+%v, %d): %v", opName(kind), d, cost, err)
	}
	var longest time.Duration
	for _, s := range dec.States {
		longest = max(longest, s.ResetAfter)
	}
	if keep != longest {
		t.Errorf("%s(t0+%v, %d): keep = %v, want the longest ResetAfter %v", opName(kind), d, cost, keep, longest)
	}
	return dec
}

// checkMulti compares a Decision over several limits with the wanted
// overall result, binding limit and per-limit states.
func checkMulti(t *testing.T, call string, d core.Decision, want result, binding core.Limit, states []result) {
	t.Helper()
	if got := resultOf(d); got != want {
		t.Errorf("%s = %v, want %v", call, got, want)
	}
	if d.Limit != binding {
		t.Errorf("%s: binding limit = %v, want %v", call, d.Limit, binding)
	}
	if len(d.States) != len(states) {
		t.Fatalf("%s: %d States, want %d", call, len(d.States), len(states))
	}
	for i, s := range d.States {
		if got := stateResult(s); got != states[i] {
			t.Errorf("%s: States[%d] (%v) = %v, want %v", call, i, s.Limit, got, states[i])
		}
	}
}

// 10/s (TokenBucket) + 120/min (SlidingWindow) + 240/h (FixedWindow): a
// request is admitted only when all three admit it, and a denial by any
// one of them, here the hour, charges none.
func TestMultiLimitAllOrNothing(t *testing.T) {
	const ms = time.Millisecond
	sec := core.PerSecond(10).WithAlgorithm(core.TokenBucket)
	min := core.PerMinute(120)
	hour := core.PerHour(240).WithAlgorithm(core.FixedWindow)
	limits := []core.Limit{sec, min, hour}
	states := make([]engine.State, 3)

	// The hour's state alone: 238 of 240 used in the hour [t0, t0+1h).
	mustStep(t, hour, engine.Take, at(0), 238, states[2:])

	t.Run("a cost the hour limit cannot take is denied by it alone", func(t *testing.T) {
		d := multiStep(t, limits, engine.Take, 10*time.Second, 5, states)
		checkMulti(t, "AllowN(t0+10s, 5)", d, denied(2, 3590*time.Second, 3590*time.Second), hour, []result{
			ok(10, 0), ok(120, 0), denied(2, 3590*time.Second, 3590*time.Second),
		})
	})
	t.Run("the denial charged neither the second nor the minute", func(t *testing.T) {
		d := multiStep(t, limits, engine.Peek, 10*time.Second, 0, states)
		// Allowed: the binding limit is the one with the least Remaining.
		checkMulti(t, "PeekN(t0+10s, 0)", d, ok(2, 3590*time.Second), hour, []result{
			ok(10, 0), ok(120, 0), ok(2, 3590*time.Second),
		})
	})
	t.Run("a cost all three can take is charged to all three", func(t *testing.T) {
		d := multiStep(t, limits, engine.Take, 10*time.Second, 2, states)
		// sec: 8 tokens, full after 2·100ms; min: cur=2, weighs until the
		// end of the next minute, t0+120s; hour: 240 used.
		checkMulti(t, "AllowN(t0+10s, 2)", d, ok(0, 3590*time.Second), hour, []result{
			ok(8, 200*ms), ok(118, 110*time.Second), ok(0, 3590*time.Second),
		})
	})
	t.Run("a cost above one limit's capacity is denied for ever", func(t *testing.T) {
		// 11 > sec's burst of 10: Never, which is the longest RetryAfter.
		d := multiStep(t, limits, engine.Take, 10*time.Second, 11, states)
		checkMulti(t, "AllowN(t0+10s, 11)", d, denied(8, 200*ms, core.Never), sec, []result{
			denied(8, 200*ms, core.Never), ok(118, 110*time.Second), denied(0, 3590*time.Second, 3590*time.Second),
		})
	})
}

// When several limits deny, the one with the longest RetryAfter binds.
func TestMultiLimitLongestRetryAfterBinds(t *testing.T) {
	sec := core.PerSecond(2).WithAlgorithm(core.FixedWindow)
	min := core.PerMinute(3).WithAlgorithm(core.FixedWindow)
	for _, order := range [][]core.Limit{{sec, min}, {min, sec}} {
		states := make([]engine.State, 2)
		secFirst := order[0] == sec
		pick := func(s, m result) []result {
			if secFirst {
				return []result{s, m}
			}
			return []result{m, s}
		}
		name := "second limit first"
		if !secFirst {
			name = "minute limit first"
		}
		t.Run(name, func(t *testing.T) {
			d := multiStep(t, order, engine.Take, 0, 2, states)
			checkMulti(t, "AllowN(t0, 2)", d, ok(0, time.Second), sec, pick(ok(0, time.Second), ok(1, time.Minute)))

			// Both deny: sec until t0+1s, min until t0+1m.
			d = multiStep(t, order, engine.Take, 0, 2, states)
			checkMulti(t, "AllowN(t0, 2)", d, denied(1, time.Minute, time.Minute), min,
				pick(denied(0, time.Second, time.Second), denied(1, time.Minute, time.Minute)))

			// sec has a new window; min still denies.
			d = multiStep(t, order, engine.Take, time.Second, 2, states)
			checkMulti(t, "AllowN(t0+1s, 2)", d, denied(1, 59*time.Second, 59*time.Second), min,
				pick(ok(2, 0), denied(1, 59*time.Second, 59*time.Second)))

			// Allowed: min has the least Remaining (0 against 1).
			d = multiStep(t, order, engine.Take, time.Second, 1, states)
			checkMulti(t, "AllowN(t0+1s, 1)", d, ok(0, 59*time.Second), min,
				pick(ok(1, time.Second), ok(0, 59*time.Second)))
		})
	}
}

// When allowed, the limit with the least Remaining binds and, among equal
// Remaining, the one with the longest ResetAfter, in either order.
func TestMultiLimitTieGoesToLongestResetAfter(t *testing.T) {
	sec := core.PerSecond(5).WithAlgorithm(core.FixedWindow)
	min := core.PerMinute(5).WithAlgorithm(core.FixedWindow)
	for _, order := range [][]core.Limit{{sec, min}, {min, sec}} {
		d := multiStep(t, order, engine.Take, 500*time.Millisecond, 2, make([]engine.State, 2))
		if got, want := resultOf(d), ok(3, 59500*time.Millisecond); got != want || d.Limit != min {
			t.Errorf("AllowN(t0+500ms, 2) over %v = %v bound by %v, want %v bound by %v", order, got, d.Limit, want, min)
		}
	}
}

// A LeakyBucket among several limits: the Decision carries its Delay.
func TestMultiLimitDelay(t *testing.T) {
	const ms = time.Millisecond
	leaky := core.PerSecond(2).WithBurst(3).WithAlgorithm(core.LeakyBucket) // T = 500ms
	min := core.PerMinute(10).WithAlgorithm(core.SlidingLog)
	limits := []core.Limit{min, leaky}
	states := make([]engine.State, 2)
	for i, want := range []struct {
		d     result
		bound core.Limit
	}{
		{queued(2, 500*ms, 0), leaky},
		{queued(1, time.Second, 500*ms), leaky},
		{queued(0, 1500*ms, time.Second), leaky},
		{denied(0, 1500*ms, 500*ms), leaky}, // the queue is full; nothing is charged
	} {
		d := multiStep(t, limits, engine.Take, 0, 1, states)
		if got := resultOf(d); got != want.d || d.Limit != want.bound {
			t.Errorf("request %d: AllowN(t0, 1) = %v bound by %v, want %v bound by %v", i+1, got, d.Limit, want.d, want.bound)
		}
	}
	d := multiStep(t, limits, engine.Peek, 0, 0, states)
	if got, want := stateResult(d.States[0]), ok(7, time.Minute); got != want {
		t.Errorf("PeekN(t0, 0): the minute limit = %v, want %v (the denied request took nothing)", got, want)
	}
}

// Charge and Refund apply to every limit; the Decision reports whether the
// key is within all of them afterwards.
func TestMultiLimitChargeAndRefund(t *testing.T) {
	sec := core.PerSecond(10).WithAlgorithm(core.FixedWindow)
	min := core.PerMinute(20).WithAlgorithm(core.FixedWindow)
	limits := []core.Limit{sec, min}
	states := make([]engine.State, 2)
	multiStep(t, limits, engine.Take, 0, 5, states)

	// sec: 17 of 10 until t0+1s; min: 17 of 20.
	d := multiStep(t, limits, engine.Charge, 0, 12, states)
	checkMulti(t, "Charge(t0, 12)", d, denied(0, time.Second, time.Second), sec, []result{
		denied(0, time.Second, time.Second), ok(3, time.Minute),
	})
	// At t0+1s sec is replenished; min is 17 of 20.
	d = multiStep(t, limits, engine.Take, time.Second, 4, states)
	checkMulti(t, "AllowN(t0+1s, 4)", d, denied(3, 59*time.Second, 59*time.Second), min, []result{
		ok(10, 0), denied(3, 59*time.Second, 59*time.Second),
	})
	d = multiStep(t, limits, engine.Refund, time.Second, 30, states)
	checkMulti(t, "Refund(t0+1s, 30)", d, ok(10, 0), sec, []result{ok(10, 0), ok(20, 0)})
}

// The same multi-limit flow through a Limiter on the memory store: limits
// are named after their policy and every Decision carries every state.
func TestLimiterMultiLimit(t *testing.T) {
	clock := newManualClock(t0)
	lim := newLimiter(t, clock, core.PerSecond(10), core.PerMinute(120).WithAlgorithm(core.FixedWindow))
	ctx := context.Background()
	for i := range 10 {
		d, err := lim.Allow(ctx, "alice")
		if err != nil || !d.Allowed {
			t.Fatalf("Allow #%d = %v, %v; want allowed", i+1, resultOf(d), err)
		}
	}
	d, err := lim.Allow(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// Per second (sliding): cur=10, the next window at e ≥ 1e6 − ⌊9e6/10⌋.
	want := denied(0, 2*time.Second, 1100*time.Millisecond)
	if got := resultOf(d); got != want || d.Limit.Name != "10-per-1s" {
		t.Errorf("Allow #11 = %v bound by %q, want %v bound by \"10-per-1s\"", got, d.Limit.Name, want)
	}
	if len(d.States) != 2 || d.States[1].Limit.Name != "120-per-1m" || d.States[1].Remaining != 110 || !d.States[1].Allowed {
		t.Errorf("Allow #11: States = %+v, want the minute limit allowed with 110 remaining", d.States)
	}
	var names []string
	d.Each(func(s core.LimitState) { names = append(names, s.Limit.PolicyName()) })
	if !reflect.DeepEqual(names, []string{"10-per-1s", "120-per-1m"}) {
		t.Errorf("Each visited %q, want the limits in order", names)
	}
	// Another key is independent.
	if d, err := lim.Allow(ctx, "bob"); err != nil || !d.Allowed || d.Remaining != 9 {
		t.Errorf("Allow(bob) = %v, %v; want allowed with 9 remaining", resultOf(d), err)
	}
}

// Combine, exported for stores that compute each limit's state themselves,
// follows the same rules.
func TestCombine(t *testing.T) {
	tests := []struct {
		name    string
		parts   []engine.LimitResult
		want    engine.Result
		binding int
	}{
		{
			"allowed: the least Remaining binds",
			[]engine.LimitResult{{Allowed: true, Remaining: 5, Reset: 9}, {Allowed: true, Remaining: 2, Reset: 1}, {Allowed: true, Remaining: 3, Reset: 8}},
			engine.Result{Allowed: true, Remaining: 2, Reset: 1}, 1,
		},
		{
			"allowed: among equal Remaining the longest Reset binds",
			[]engine.LimitResult{{Allowed: true, Remaining: 2, Reset: 5}, {Allowed: true, Remaining: 2, Reset: 7}, {Allowed: true, Remaining: 2, Reset: 6}},
			engine.Result{Allowed: true, Remaining: 2, Reset: 7}, 1,
		},
		{
			"allowed: the longest Delay is the Result's",
			[]engine.LimitResult{{Allowed: true, Remaining: 1, Delay: 4}, {Allowed: true, Remaining: 2, Delay: 9}, {Allowed: true, Remaining: 3}},
			engine.Result{Allowed: true, Remaining: 1, Delay: 9}, 0,
		},
		{
			"denied: the denying limit with the longest Retry binds, not an allowing one",
			[]engine.LimitResult{{Allowed: true, Remaining: 0, Reset: 99}, {Allowed: false, Remaining: 1, Reset: 4, Retry: 3}, {Allowed: false, Remaining: 0, Reset: 5, Retry: 4, Window: 2}},
			engine.Result{Remaining: 0, Reset: 5, Retry: 4, Window: 2}, 2,
		},
		{
			"denied: never (-1) is the longest Retry",
			[]engine.LimitResult{{Allowed: false, Remaining: 0, Reset: 5, Retry: 5}, {Allowed: false, Remaining: 2, Retry: -1}, {Allowed: true, Remaining: 3}},
			engine.Result{Remaining: 2, Retry: -1}, 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res engine.Result
			engine.Combine(tt.parts, &res)
			tt.want.Binding, tt.want.Limits = tt.binding, tt.parts
			if !reflect.DeepEqual(res, tt.want) {
				t.Errorf("Combine = %+v, want %+v", res, tt.want)
			}
		})
	}
	t.Run("one limit's part is the Result itself, without Limits", func(t *testing.T) {
		var res engine.Result
		engine.Combine([]engine.LimitResult{{Allowed: true, Remaining: 1, Reset: 2}}, &res)
		if want := (engine.Result{Allowed: true, Remaining: 1, Reset: 2}); !reflect.DeepEqual(res, want) {
			t.Errorf("Combine = %+v, want %+v", res, want)
		}
	})
}

// Step checks the number of states against the number of limits.
func TestStepStatesMustMatchLimits(t *testing.T) {
	limits := []core.Limit{core.PerSecond(1), core.PerMinute(10)}
	for _, n := range []int{0, 1, 3} {
		op := op{Key: "k", Limits: limits, Cost: 1}
		if _, _, err := step(&op, t0us, make([]engine.State, n)); !errors.Is(err, core.ErrInvalidOp) {
			t.Errorf("Step with %d states for 2 limits: error %v, want one wrapping ErrInvalidOp", n, err)
		}
	}
}

// Step writes the parts of several limits into op.Parts when it has a place
// for each, and the Result is the same, field by field, as when Step
// allocates them; a Parts too short is not written.
func TestStepWritesPartsWhereTheCallerSays(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	algs := []core.Algorithm{core.SlidingWindow, core.FixedWindow, core.TokenBucket, core.GCRA, core.LeakyBucket, core.SlidingLog}
	clone := func(states []engine.State) []engine.State {
		c := slices.Clone(states)
		for i := range c {
			c[i].Log = slices.Clone(c[i].Log)
		}
		return c
	}
	for trial := range 300 {
		n := 2 + r.IntN(4)
		var limits []core.Limit
		for range n {
			limits = append(limits, randomLimit(r, algs[r.IntN(len(algs))]))
		}
		tr := randomTrace(r, limits[0], 40, true)
		states := make([]engine.State, n)
		for i := range tr.at {
			op, err := (&op{Kind: tr.kind[i], Key: "k", Limits: limits, Cost: tr.cost[i]}).engineOp()
			if err != nil {
				t.Fatal(err)
			}
			before := clone(states)
			var want engine.Result
			wkeep, werr := engine.Step(&op, tr.at[i], states, &want)

			parts := make([]engine.LimitResult, n+r.IntN(2)) // room for every limit, or one more
			for j := range parts {
				parts[j] = engine.LimitResult{Allowed: true, Remaining: -7, Reset: -7, Retry: -7, Delay: -7, Window: -7} // what Step must overwrite
			}
			op.Parts = parts
			given := clone(before)
			var got engine.Result
			gkeep, gerr := engine.Step(&op, tr.at[i], given, &got)
			if !errors.Is(gerr, werr) || gkeep != wkeep || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(given, states) {
				t.Fatalf("trial %d op %d (%v): with Parts %+v, %d, %v; without %+v, %d, %v", trial, i, limits, got, gkeep, gerr, want, wkeep, werr)
			}
			if werr != nil {
				continue
			}
			if &got.Limits[0] != &parts[0] || cap(got.Limits) != n {
				t.Fatalf("trial %d op %d: Result.Limits is not op.Parts[:%d:%d] (capacity %d): an append would write past the parts", trial, i, n, n, cap(got.Limits))
			}
			short := make([]engine.LimitResult, n-1)
			op.Parts = short
			var again engine.Result
			if _, err := engine.Step(&op, tr.at[i], clone(before), &again); err != nil || !reflect.DeepEqual(again, want) {
				t.Fatalf("trial %d op %d: with a short Parts %+v, %v; want %+v", trial, i, again, err, want)
			}
			if !reflect.DeepEqual(short, make([]engine.LimitResult, n-1)) {
				t.Fatalf("trial %d op %d: Step wrote into a Parts with no room for every limit", trial, i)
			}
		}
	}
}
