package lease_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease"
	"github.com/tollgate/tollgate/core/lease/leasetest"
	"github.com/tollgate/tollgate/core/memstore"
)

// TestFleetNeverAdmitsMoreThanOneStore runs the fleet simulator on a
// memstore: fleets of instances of random demand on a virtual clock, with
// crashes, Flushes, fleet-wide Resets, spikes and key floods, every
// admission replayed on one exact single store (see package leasetest).
// The Redis store runs it on a real Redis (TestSimulatedLeasedFleets).
func TestFleetNeverAdmitsMoreThanOneStore(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) core.Store { return memstore.New(memstore.WithSweepInterval(0)) })
}

// An idle holder of a token bucket's units: while it holds them the bucket
// refills; then another instance takes all the shared store shows, and
// the holder spends what it holds. Every admission must still pass the
// exact single store: the lease ends before the bucket plus the units
// held could pass its capacity.
func TestAnIdleHolderOfATokenBucketNeverOverAdmits(t *testing.T) {
	for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			plan := planOf(leasetest.LimitOf(alg, 1000, time.Second).WithBurst(100))
			for idle := int64(0); idle <= 120*ms; idle += 2 * ms {
				shared := newShared(t)
				a, b := newLease(t, shared), newLease(t, shared)
				or := leasetest.NewOracle(plan)
				admit := func(st *lease.Store, now int64) {
					t.Helper()
					if take(t, st, plan, "k", 1, now).Allowed && !or.Admit(1, now) {
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
