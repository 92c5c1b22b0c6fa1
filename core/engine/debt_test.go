package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// debtOp is one operation of a TestDebt case, at t0 + at.
type debtOp struct {
	at   time.Duration
	kind engine.Kind
	cost int64
}

func TestDebt(t *testing.T) {
	perMinute := func(alg core.Algorithm) core.Limit { return core.PerMinute(10).WithAlgorithm(alg) }
	take := func(at time.Duration, cost int64) debtOp { return debtOp{at, engine.Take, cost} }
	for _, tc := range []struct {
		name  string
		limit core.Limit
		ops   []debtOp
		at    time.Duration
		want  float64
	}{
		{"a fixed window counts its current window", perMinute(core.FixedWindow),
			[]debtOp{take(10*time.Second, 4)}, 20 * time.Second, 0.4},
		{"a fixed window owes nothing in the next window", perMinute(core.FixedWindow),
			[]debtOp{take(10*time.Second, 4)}, time.Minute, 0},
		{"a sliding window weighs the previous window by what is left of it", perMinute(core.SlidingWindow),
			[]debtOp{take(30*time.Second, 6)}, 75 * time.Second, 0.45}, // 6 × 45/60
		{"a sliding window adds the current window", perMinute(core.SlidingWindow),
			[]debtOp{take(30*time.Second, 6), take(70*time.Second, 2)}, 75 * time.Second, 0.65},
		{"a sliding window owes nothing two windows on", perMinute(core.SlidingWindow),
			[]debtOp{take(30*time.Second, 6)}, 2 * time.Minute, 0},
		{"a sliding log counts the entries younger than the period", perMinute(core.SlidingLog),
			[]debtOp{take(0, 3), take(30*time.Second, 2)}, 45 * time.Second, 0.5},
		{"a sliding log drops the entries a period old", perMinute(core.SlidingLog),
			[]debtOp{take(0, 3), take(30*time.Second, 2)}, time.Minute, 0.2},
		{"a bucketed window counts its live buckets", perMinute(core.BucketedWindow).WithPrecision(10 * time.Second),
			[]debtOp{take(5*time.Second, 3), take(25*time.Second, 2)}, 55 * time.Second, 0.5},
		{"a bucketed window drops the buckets a period old", perMinute(core.BucketedWindow).WithPrecision(10 * time.Second),
			[]debtOp{take(5*time.Second, 3), take(25*time.Second, 2)}, 65 * time.Second, 0.2},
		{"a token bucket owes the tokens it misses", perMinute(core.TokenBucket).WithBurst(20),
			[]debtOp{take(0, 20)}, 30 * time.Second, 0.75}, // 5 of 20 refilled
		{"a token bucket refilled to its burst owes nothing", perMinute(core.TokenBucket).WithBurst(20),
			[]debtOp{take(0, 20)}, 2 * time.Minute, 0},
		{"GCRA owes the time its TAT is ahead, over the burst's", perMinute(core.GCRA),
			[]debtOp{take(0, 5)}, 15 * time.Second, 0.25}, // TAT = 30s, B·T = 60s
		{"a leaky bucket owes as GCRA does", perMinute(core.LeakyBucket).WithBurst(5),
			[]debtOp{take(0, 4)}, 6 * time.Second, 0.6}, // TAT = 24s, B·T = 30s
		{"an exhausted limit is fully in debt", perMinute(core.SlidingWindow),
			[]debtOp{take(0, 10)}, time.Second, 1},
		{"post-hoc debt beyond a window's quota counts as full", perMinute(core.FixedWindow),
			[]debtOp{{0, engine.Charge, 25}}, 10 * time.Second, 1},
		{"post-hoc debt beyond a bucket's burst counts as full", perMinute(core.TokenBucket),
			[]debtOp{{0, engine.Charge, 30}}, 90 * time.Second, 1}, // −20 tokens, 15 refilled
		{"a full refund leaves nothing owed", perMinute(core.GCRA),
			[]debtOp{take(0, 5), {time.Second, engine.Refund, 5}}, time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			states := make([]engine.State, 1)
			for _, o := range tc.ops {
				mustStep(t, tc.limit, o.kind, at(o.at), o.cost, states)
			}
			if got := engine.Debt(states[0], tc.limit.Quota, tc.limit.Capacity(), at(tc.at)); got != tc.want {
				t.Errorf("Debt(t0+%v) of %v = %v, want %v", tc.at, tc.limit, got, tc.want)
			}
		})
	}
}

// A state Debt cannot read counts as fully in debt; the zero State is fresh.
func TestDebtOfStatesItCannotRead(t *testing.T) {
	l := core.PerMinute(10)
	states := make([]engine.State, 1)
	mustStep(t, l, engine.Take, t0us, 3, states)
	used := states[0]
	garbage := used
	garbage.Ident = used.Ident | 0xf // an algorithm that does not exist
	for _, tc := range []struct {
		name            string
		st              engine.State
		quota, capacity int64
		want            float64
	}{
		{"the zero state is fresh", engine.State{}, 10, 10, 0},
		{"a used state read with its numbers", used, 10, 10, 0.3},
		{"a quota below 1", used, 0, 0, 1},
		{"a capacity other than the quota of a window", used, 10, 20, 1},
		{"an ident no limit writes", garbage, 10, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := engine.Debt(tc.st, tc.quota, tc.capacity, t0us); got != tc.want {
				t.Errorf("Debt(%+v, %d, %d) = %v, want %v", tc.st, tc.quota, tc.capacity, got, tc.want)
			}
		})
	}
}

// Debt reads a log without changing it, even when entries have expired.
func TestDebtLeavesTheLogAlone(t *testing.T) {
	l := core.PerMinute(10).WithAlgorithm(core.SlidingLog)
	states := make([]engine.State, 1)
	mustStep(t, l, engine.Take, t0us, 3, states)
	mustStep(t, l, engine.Take, at(30*time.Second), 2, states)
	before := slices.Clone(states[0].Log)
	if got := engine.Debt(states[0], 10, 10, at(time.Minute)); got != 0.2 {
		t.Fatalf("Debt(t0+1m) = %v, want 0.2", got)
	}
	if !slices.Equal(states[0].Log, before) || states[0].A != 5 {
		t.Errorf("after Debt the state is %+v, want A = 5 and Log %v", states[0], before)
	}
}

// On random traces of every algorithm, Debt agrees with what Step reports:
// 0 exactly when the limit is fully replenished (ResetAfter 0), and
// Remaining = ⌊Capacity·(1 − Debt)⌋, now and later.
func TestDebtAgreesWithRemaining(t *testing.T) {
	for _, alg := range core.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			partial := 0 // checks where the debt was strictly between 0 and 1
			for seed := range uint64(40) {
				r := rand.New(rand.NewPCG(seed, 0xdeb7+uint64(alg)))
				l := randomLimit(r, alg)
				if seed%10 == 0 && (alg == core.SlidingWindow || alg == core.TokenBucket || alg == core.GCRA || alg == core.LeakyBucket) {
					l = core.PerDay(1_000_000_000 + r.Int64N(1000)).WithAlgorithm(alg) // a wide limit
				}
				tr := randomTrace(r, l, 200, true)
				states := make([]engine.State, 1)
				for i := range tr.at {
					mustStep(t, l, tr.kind[i], tr.at[i], tr.cost[i], states)
					for _, later := range []int64{tr.at[i], tr.at[i] + r.Int64N(2*l.Period.Microseconds())} {
						where := fmt.Sprintf("seed %d, %v, step %d, t0+%dµs", seed, l, i, later-t0us)
						debt := checkDebt(t, where, l, states[0], later)
						if debt > 0 && debt < 1 {
							partial++
						}
					}
				}
			}
			if partial < 1000 {
				t.Errorf("only %d checks saw a partial debt; the traces are too gentle", partial)
			}
		})
	}
}

func checkDebt(t *testing.T, where string, l core.Limit, st engine.State, now int64) float64 {
	t.Helper()
	debt := engine.Debt(st, l.Quota, l.Capacity(), now)
	p := mustStep(t, l, engine.Peek, now, 0, cloneStates([]engine.State{st}))
	if (debt == 0) != (p.ResetAfter == 0) {
		t.Fatalf("%s: Debt = %v but a peek reports ResetAfter %v", where, debt, p.ResetAfter)
	}
	// Remaining is the capacity left, floored: within float rounding of it.
	left := float64(l.Capacity()) * (1 - debt)
	slack := 1e-9 * float64(l.Capacity())
	if rem := float64(p.Remaining); rem > left+slack || rem <= left-1-slack {
		t.Fatalf("%s: Debt = %v, so ⌊capacity %d × (1 − Debt)⌋ = ⌊%v⌋, but Remaining = %d", where, debt, l.Capacity(), left, p.Remaining)
	}
	if math.IsNaN(debt) || debt < 0 || debt > 1 {
		t.Fatalf("%s: Debt = %v, want within [0, 1]", where, debt)
	}
	return debt
}
