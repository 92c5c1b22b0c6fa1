package engine

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// The fast path (fast.go) gives the Result, keep and state the general path
// gives, for every state, time and cost: random limits of the fast path's
// algorithms, wide (Limit.Wide) and not, random traces of Takes and Peeks (and Charges and
// Refunds, on the general path, to make debts), with clocks that jump and
// step back, and states of other layouts and lowered quotas.
func TestFastPathEqualsGeneralPath(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	algs := []Algorithm{GCRA, TokenBucket, SlidingWindow, FixedWindow}
	periods := []time.Duration{time.Microsecond, 7 * time.Microsecond, time.Millisecond, time.Second, 90 * time.Second, time.Hour, 24 * time.Hour, 370 * 24 * time.Hour}
	quotas := []int64{1, 2, 3, 7, 100, 1000, 1 << 20, 999_999_937, 1 << 40, MaxQuota}
	checked, wide := 0, 0
	for trace := range 3000 {
		spec := Spec{Algorithm: algs[r.IntN(len(algs))], Quota: quotas[r.IntN(len(quotas))], Period: periods[r.IntN(len(periods))]}
		if r.IntN(3) == 0 {
			spec.Burst = 1 + r.Int64N(3*spec.Quota)
		}
		l, err := Compile(spec)
		if err != nil {
			continue
		}
		if l.Wide {
			wide++
		}
		plan, _ := NewPlan("", []Limit{l})
		var st State
		if r.IntN(4) == 0 { // a state of another layout, or of a lowered quota
			st = State{Ident: l.Ident ^ uint64(r.IntN(2)), A: r.Int64N(1 << 40), B: r.Int64N(1 << 30), C: r.Int64N(1 << 20)}
		}
		now := int64(1_700_000_000_000_000) + r.Int64N(1<<30)
		for step := range 60 {
			switch x := r.IntN(10); {
			case x < 4:
			case x < 8:
				now += r.Int64N(l.Period + 1)
			case x < 9:
				now -= r.Int64N(l.Period + 1) // a clock that stepped back
			default:
				now += r.Int64N(100 * l.Period)
			}
			op := Op{Plan: plan, Key: "k", Kind: []Kind{Take, Take, Peek, Charge, Refund}[r.IntN(5)]}
			op.Cost = []int64{0, 1, 1, 2, l.Capacity, l.Capacity + 1, max(l.Capacity/2, 1)}[r.IntN(7)]
			if op.Kind == Charge || op.Kind == Refund {
				op.Cost = []int64{1, l.Capacity, 10 * l.Capacity, math.MaxInt64}[r.IntN(4)]
			}
			slowSt, fastSt := clone(st), clone(st)
			var slowRes, fastRes Result
			slowKeep := slow1(&op, &l, now, &slowSt, &slowRes)
			fastKeep, ok := fast1(&op, &l, now, &fastSt, &fastRes)
			if !ok {
				if op.Kind <= Peek {
					t.Fatalf("trace %d step %d: the fast path refused a %s of %+v", trace, step, op.Kind, l)
				}
				st = slowSt
				continue
			}
			checked++
			if fastKeep != slowKeep || !reflect.DeepEqual(fastRes, slowRes) || !reflect.DeepEqual(fastSt, slowSt) {
				t.Fatalf("trace %d step %d: %s(%d) of %+v at %d on %+v:\n fast %+v keep %d state %+v\n slow %+v keep %d state %+v",
					trace, step, op.Kind, op.Cost, spec, now, st, fastRes, fastKeep, fastSt, slowRes, slowKeep, slowSt)
			}
			st = slowSt
		}
	}
	if checked < 50_000 {
		t.Errorf("only %d operations took the fast path", checked)
	}
	if wide < 300 {
		t.Errorf("only %d traces of wide limits", wide)
	}
}

func clone(st State) State {
	st.Log = append([]Mark(nil), st.Log...)
	return st
}

// The fast path of several limits (fastMulti) gives the Result, keep and
// states of the general one (Step without it): random plans of two to four limits
// of the fast path's algorithms, wide and not, with random traces of Takes
// and Peeks that one limit or another denies (Charges and Refunds, on the
// general path, make debts), clocks that jump and step back, and states of
// other layouts. A plan with a limit of another algorithm is refused,
// unchanged.
func TestFastPathEqualsGeneralPathOnSeveralLimits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	algs := []Algorithm{GCRA, TokenBucket, SlidingWindow, FixedWindow}
	periods := []time.Duration{time.Microsecond, time.Millisecond, time.Second, 90 * time.Second, time.Hour, 370 * 24 * time.Hour}
	quotas := []int64{1, 2, 3, 7, 100, 1 << 20, 999_999_937, 1 << 40}
	checked, denied, refused := 0, 0, 0
	for trace := range 1500 {
		n := 2 + r.IntN(3)
		var limits []Limit
		for len(limits) < n {
			spec := Spec{Algorithm: algs[r.IntN(len(algs))], Quota: quotas[r.IntN(len(quotas))], Period: periods[r.IntN(len(periods))]}
			if trace%25 == 0 && len(limits) == 1 {
				spec.Algorithm = []Algorithm{LeakyBucket, SlidingLog}[r.IntN(2)] // no fast path
			}
			if r.IntN(3) == 0 {
				spec.Burst = 1 + r.Int64N(3*spec.Quota)
			}
			if l, err := Compile(spec); err == nil {
				limits = append(limits, l)
			}
		}
		plan, err := NewPlan("", limits)
		if err != nil {
			t.Fatal(err)
		}
		states := make([]State, n)
		for i := range states {
			if r.IntN(4) == 0 && !limits[i].Algorithm.Logs() { // a state of another layout, or of a lowered quota
				states[i] = State{Ident: limits[i].Ident ^ uint64(r.IntN(2)), A: r.Int64N(1 << 40), B: r.Int64N(1 << 30), C: r.Int64N(1 << 20)}
			}
		}
		now := int64(1_700_000_000_000_000) + r.Int64N(1<<30)
		shortest := limits[0].Period
		for _, l := range limits {
			shortest = min(shortest, l.Period)
		}
		for step := range 40 {
			switch x := r.IntN(10); {
			case x < 4:
			case x < 8:
				now += r.Int64N(shortest + 1)
			case x < 9:
				now -= r.Int64N(shortest + 1) // a clock that stepped back
			default:
				now += r.Int64N(100 * shortest)
			}
			op := Op{Plan: plan, Key: "k", Kind: []Kind{Take, Take, Take, Peek, Charge, Refund}[r.IntN(6)]}
			l := limits[r.IntN(n)]
			op.Cost = []int64{0, 1, 1, 2, l.Capacity, l.Capacity + 1, max(l.Capacity/2, 1)}[r.IntN(7)]
			if op.Kind == Charge || op.Kind == Refund {
				op.Cost = []int64{1, l.Capacity, 10 * l.Capacity}[r.IntN(3)]
			}
			slowSt, fastSt, before := cloneAll(states), cloneAll(states), cloneAll(states)
			slowLs, fastLs := make([]LimitResult, n), make([]LimitResult, n)
			var slowRes, fastRes Result
			fastPath = false
			slowOp := op
			slowOp.Parts = slowLs
			slowKeep, err := Step(&slowOp, now, slowSt, &slowRes)
			fastPath = true
			if err != nil {
				t.Fatal(err)
			}
			fastKeep, ok := fastMulti(&op, limits, now, fastSt, fastLs, &fastRes)
			if !ok {
				if !reflect.DeepEqual(fastSt, before) {
					t.Fatalf("trace %d step %d: a refused %s changed the states", trace, step, op.Kind)
				}
				if op.Kind <= Peek {
					refused++
				}
				states = slowSt
				continue
			}
			checked++
			if !slowRes.Allowed {
				denied++
			}
			if fastKeep != slowKeep || !reflect.DeepEqual(fastRes, slowRes) || !reflect.DeepEqual(fastSt, slowSt) {
				t.Fatalf("trace %d step %d: %s(%d) of %+v at %d on %+v:\n fast %+v keep %d states %+v\n slow %+v keep %d states %+v",
					trace, step, op.Kind, op.Cost, limits, now, states, fastRes, fastKeep, fastSt, slowRes, slowKeep, slowSt)
			}
			states = slowSt
		}
	}
	if checked < 20_000 || denied < 2_000 || refused == 0 {
		t.Errorf("%d operations took the fast path, %d of them denied, %d refused: the traces miss a case", checked, denied, refused)
	}
}

func cloneAll(states []State) []State {
	c := make([]State, len(states))
	for i := range states {
		c[i] = clone(states[i])
	}
	return c
}

// TakeOne decides a Take as Step's general path does, on every algorithm,
// wide GCRA and TokenBucket limits included: the Result's Brief (but its time, which the
// caller sets: TakeOne's Take is at now), keep and state, over random
// traces whose costs pass and fail, with a clock that steps back.
func TestTakeOneEqualsStep(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var specs []Spec
	for a := range numAlgorithms {
		spec := Spec{Algorithm: Algorithm(a), Quota: []int64{1, 5, 1000, 1 << 40}[a%4], Period: time.Second}
		if spec.Algorithm == Concurrency {
			spec.Quota = 3 // at most MaxInFlight
		}
		specs = append(specs, spec)
	}
	for _, a := range []Algorithm{GCRA, TokenBucket} {
		specs = append(specs, Spec{Algorithm: a, Quota: 1 << 40, Period: 370 * 24 * time.Hour}) // Capacity × Period past 2^63
	}
	for i, spec := range specs {
		l, err := Compile(spec)
		if err != nil {
			t.Fatalf("Compile(%+v): %v", spec, err)
		}
		if wantWide := i >= int(numAlgorithms); l.Wide != wantWide {
			t.Fatalf("Compile(%+v).Wide = %v, want %v", spec, l.Wide, wantWide)
		}
		plan, _ := NewPlan("", []Limit{l})
		var stepSt, oneSt State
		now := int64(1_700_000_000_000_000)
		for step := range 500 {
			now += r.Int64N(l.Period/2+1) - l.Period/20
			cost := []int64{0, 1, 1, 2, l.Capacity, l.Capacity + 1}[r.IntN(6)]
			states := []State{stepSt}
			var stepRes Result
			fastPath = false // Step's general path, not the fast one TakeOne shares
			stepKeep, err := Step(&Op{Plan: plan, Key: "k", Kind: Take, Cost: cost}, now, states, &stepRes)
			fastPath = true
			if err != nil {
				t.Fatalf("%s step %d: Step: %v", l.Algorithm, step, err)
			}
			var one Brief
			var oneKeep int64
			one.Allowed, one.Remaining, one.Reset, one.Wait, one.Window, one.Lease, oneKeep = TakeOne(plan, cost, now, &oneSt)
			one.At = now
			if oneKeep != stepKeep || one != BriefOf(&stepRes) || !reflect.DeepEqual(clone(oneSt), clone(states[0])) {
				t.Fatalf("%s step %d: Take(%d) at %d:\n TakeOne %+v keep %d state %+v\n Step    %+v keep %d state %+v",
					l.Algorithm, step, cost, now, one, oneKeep, oneSt, BriefOf(&stepRes), stepKeep, states[0])
			}
			stepSt = clone(states[0])
		}
	}
}

// NewPlan picks each single limit's fast path for TakeOne, and takeSlow
// for the rest: an algorithm sent to the slow path would still decide
// right (TestTakeOneEqualsStep) but lose its speed unseen.
func TestNewPlanPicksTakeOnesFunction(t *testing.T) {
	gcra, _ := Compile(Spec{Algorithm: GCRA, Quota: 10, Period: time.Second})
	for _, tc := range []struct {
		spec Spec
		want uint8
	}{
		{Spec{Algorithm: GCRA, Quota: 10, Period: time.Second}, gcraTake},
		{Spec{Algorithm: TokenBucket, Quota: 10, Period: time.Second}, tokenTake},
		{Spec{Algorithm: SlidingWindow, Quota: 10, Period: time.Second}, slidingTake},
		{Spec{Algorithm: FixedWindow, Quota: 10, Period: time.Second}, fixedTake},
		{Spec{Algorithm: GCRA, Quota: 1 << 40, Period: 370 * 24 * time.Hour}, wideTake},
		{Spec{Algorithm: TokenBucket, Quota: 1 << 40, Period: 370 * 24 * time.Hour}, wideTake},
		{Spec{Algorithm: SlidingWindow, Quota: 1 << 40, Period: 370 * 24 * time.Hour}, slidingTake},
		{Spec{Algorithm: LeakyBucket, Quota: 10, Period: time.Second}, slowTake},
		{Spec{Algorithm: SlidingLog, Quota: 10, Period: time.Second}, slowTake},
		{Spec{Algorithm: BucketedWindow, Quota: 10, Period: time.Second}, slowTake},
		{Spec{Algorithm: Concurrency, Quota: 3, Period: time.Second}, slowTake},
	} {
		l, err := Compile(tc.spec)
		if err != nil {
			t.Fatalf("Compile(%+v): %v", tc.spec, err)
		}
		plan, _ := NewPlan("", []Limit{l})
		if plan.take != tc.want {
			t.Errorf("%s (wide %v): take = %d, want %d", l.Algorithm, l.Wide, plan.take, tc.want)
		}
	}
	two, _ := NewPlan("", []Limit{gcra, gcra})
	if two.take != slowTake {
		t.Errorf("a plan of two limits: take = %d, want 0", two.take)
	}
}
