package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/lease/leasetest"
)

// A Take decided in process reports the reset of the last reservation
// less the time since. Another instance charges the shared store in
// between: for the window algorithms the reset is still the shared
// store's, to the microsecond; for TokenBucket and GCRA it is early by
// exactly the other's units over the rate, as the docs say.
func TestResetTimesAgainstTheSharedStore(t *testing.T) {
	const rate = 1000 // per second: a unit is 1ms
	for _, alg := range leasable {
		t.Run(alg.String(), func(t *testing.T) {
			plan := planOf(leasetest.LimitOf(alg, rate, time.Second))
			shared := newShared(t)
			st := newLease(t, shared)
			now := t0 + 100*ms
			for range 20 { // a steady demand: the instance holds a slice
				now += ms / 2
				take(t, st, plan, "k", 1, now)
			}
			before := st.Stats()
			const others = 30 // units another instance charges meanwhile
			if res, err := shared.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Cost: others, Now: now + ms/4}); err != nil || !res.Allowed {
				t.Fatalf("the other instance's Take of %d = %+v, %v", others, res, err)
			}
			now += ms / 2
			res := take(t, st, plan, "k", 1, now)
			if s := st.Stats(); s.Local != before.Local+1 || s.Reservations != before.Reservations {
				t.Fatalf("stats %+v after %+v: the Take was not decided in process", s, before)
			}
			truth, err := shared.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Peek, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			early := truth.Reset - res.Reset
			want := int64(0) // µs
			if alg == core.TokenBucket || alg == core.GCRA {
				want = others * 1e6 / rate
			}
			// A microsecond of rounding: Reset is rounded up to one.
			if d := early - want; d < -1 || d > 1 {
				t.Errorf("local Reset %dµs, the shared store's %dµs: early by %dµs, want %dµs", res.Reset, truth.Reset, early, want)
			}
		})
	}
}
