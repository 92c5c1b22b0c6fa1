package lease_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/lease"
)

// TestFleetNeverAdmitsMoreThanOneStore simulates fleets on a virtual
// clock: instances of random demand lease from one shared memstore, some
// crash (dropped with their slices, never given back), some end their
// leases early (Flush), the key is Reset fleet-wide; every admission, replayed at its
// instant on one exact state, must be admitted there too. Demand is from
// half the limit to four times it.
func TestFleetNeverAdmitsMoreThanOneStore(t *testing.T) {
	limits := map[string][]core.Limit{}
	for _, alg := range leasable {
		limits[alg.String()] = []core.Limit{limitOf(alg, 200, 100*time.Millisecond)}
		limits[alg.String()+" with burst"] = []core.Limit{limitOf(alg, 200, 100*time.Millisecond).WithBurst(50)}
	}
	limits["fixed and sliding windows together"] = []core.Limit{
		limitOf(core.FixedWindow, 300, 100*time.Millisecond), limitOf(core.SlidingWindow, 1000, time.Second).Named("s")}
	limits["token bucket and gcra together"] = []core.Limit{
		limitOf(core.TokenBucket, 300, 100*time.Millisecond), limitOf(core.GCRA, 1000, time.Second).Named("g")}
	for name, ls := range limits {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(6) {
				simulate(t, rand.New(rand.NewPCG(seed, 19)), planOf(ls...))
			}
		})
	}
}

// simulate runs one random fleet on plan and checks it against the oracle.
func simulate(t *testing.T, rng *rand.Rand, plan *engine.Plan) {
	t.Helper()
	shared := newShared(t)
	n := 2 + rng.IntN(5)
	fleet := make([]*lease.Store, n)
	weight := make([]float64, n)
	var total float64
	for i := range fleet {
		fleet[i] = newLease(t, shared, lease.WithRenewInterval(time.Duration(1+rng.IntN(20))*time.Millisecond))
		weight[i] = 0.2 + rng.Float64()
		total += weight[i]
	}
	or := newOracle(plan)
	base := newOracle(plan) // the same requests, decided one by one
	var baseAdmitted int64
	// Demand: f times the first limit's rate, Q per P, in requests of 2
	// units on average, at gaps of gap/2 on average.
	l := plan.Limits[0]
	f := []int64{1, 2, 4, 8}[rng.IntN(4)] // in halves: ½× to 4×
	gap := 8 * l.Period / (f * l.Quota)
	now := t0 + rng.Int64N(l.Period)
	var admitted, asked, local, takes int64
	count := func(st *lease.Store) { s := st.Stats(); local += s.Local; takes += s.Local + s.Waits }
	const steps = 6000
	for range steps {
		now += rng.Int64N(gap + 1)
		for _, st := range fleet {
			lease.Tick(st, now) // what the lots' timers do in real time
		}
		x := rng.Float64() * total
		i := 0
		for i < n-1 && x >= weight[i] {
			x -= weight[i]
			i++
		}
		switch r := rng.IntN(1000); {
		case r == 0: // a crash: the instance's slices are stranded
			count(fleet[i])
			fleet[i] = newLease(t, shared)
			continue
		case r == 1:
			fleet[i].Flush()
			continue
		case r == 2:
			// A Reset through every instance (an operator's, or a rule
			// reload's): the oracle forgets the key too.
			for _, st := range fleet {
				if _, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Reset, Now: now}); err != nil {
					t.Fatal(err)
				}
				lease.Wait(st)
			}
			or, base = newOracle(plan), newOracle(plan)
			continue
		}
		cost := 1 + rng.Int64N(3)
		asked += cost
		if base.admit(cost, now) {
			baseAdmitted += cost
		}
		if res := take(t, fleet[i], plan, "k", cost, now); res.Allowed {
			admitted += cost
			if !or.admit(cost, now) {
				t.Fatalf("instance %d of %d admitted %d at +%dµs; the exact single store denies it (plan %+v)", i, n, cost, now-t0, plan.Limits)
			}
		}
	}
	for _, st := range fleet {
		count(st)
	}
	// Stranded slices (crashes, Resets) and the slices held when a window
	// ends cost some of the quota; per-request decisions are the mark.
	if float64(admitted) < 0.9*float64(baseAdmitted) {
		t.Errorf("a fleet of %d admitted %d units, per-request decisions %d of %d asked: want at least 90%%", n, admitted, baseAdmitted, asked)
	}
	if testing.Verbose() {
		t.Logf("%d instances at %.1f× the limit: admitted %d, per request %d (%.1f%%), asked %d; %.1f%% decided locally", n, float64(f)/2, admitted, baseAdmitted, 100*float64(admitted)/float64(baseAdmitted), asked, 100*float64(local)/float64(takes))
	}
}

// An idle holder of a token bucket's units: while it holds them the bucket
// refills; then another instance takes all the shared store shows, and
// the holder spends what it holds. Every admission must still pass the
// exact single store: the lease ends before the bucket plus the units
// held could pass its capacity.
func TestAnIdleHolderOfATokenBucketNeverOverAdmits(t *testing.T) {
	for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			plan := planOf(limitOf(alg, 1000, time.Second).WithBurst(100))
			for idle := int64(0); idle <= 120*ms; idle += 2 * ms {
				shared := newShared(t)
				a, b := newLease(t, shared), newLease(t, shared)
				or := newOracle(plan)
				admit := func(st *lease.Store, now int64) {
					t.Helper()
					if take(t, st, plan, "k", 1, now).Allowed && !or.admit(1, now) {
						t.Fatalf("idle %dms: admitted at +%dµs; the exact single store denies it", idle/ms, now-t0)
					}
				}
				now := t0
				for range 100 { // A's demand of 2000/s builds a slice
					now += 500
					admit(a, now)
				}
				now += idle
				for range 150 { // B takes all it is given at once
					admit(b, now)
				}
				for range 100 { // then A spends what it holds
					admit(a, now)
				}
			}
		})
	}
}
