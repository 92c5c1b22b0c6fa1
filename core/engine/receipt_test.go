package engine_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// A refund with a receipt never leaves more room than had the charge never
// been made: after a charge, later charges and the refund, every cost at
// every later instant that the state admits, the state without the charge
// admits too. The window algorithms (with an exact receipt) and a refund
// with nothing between are exact: the two states decide alike.
func TestRefundWithAReceiptIsNeverMoreThanUndoing(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	periods := []time.Duration{time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour}
	quotas := []int64{1, 3, 10, 1000, 10_000_000, 1 << 40}
	for i := range 3000 {
		l := core.Limit{
			Algorithm: []core.Algorithm{core.FixedWindow, core.SlidingWindow, core.SlidingLog, core.BucketedWindow,
				core.TokenBucket, core.GCRA, core.LeakyBucket}[rng.IntN(7)],
			Quota:  quotas[rng.IntN(len(quotas))],
			Period: periods[rng.IntN(len(periods))],
		}
		if rng.IntN(3) == 0 {
			l.Burst = 1 + rng.Int64N(2*l.Quota)
		}
		if l.Algorithm == core.SlidingLog && l.Quota > 1000 {
			l.Quota = 1 + rng.Int64N(1000)
		}
		cl, err := compile(l)
		if err != nil {
			continue
		}
		plan, err := engine.NewPlan("", []engine.Limit{cl})
		if err != nil {
			t.Fatal(err)
		}
		p := int64(l.Period / time.Microsecond)
		step := func() int64 {
			switch rng.IntN(4) {
			case 0:
				return 0
			case 1:
				return rng.Int64N(p/4 + 1)
			case 2:
				return rng.Int64N(2*p + 1)
			}
			return rng.Int64N(100)
		}
		now := t0us + rng.Int64N(p)
		with, without := make([]engine.State, 1), make([]engine.State, 1)
		apply := func(states []engine.State, o engine.Op, at int64) engine.Result {
			t.Helper()
			var res engine.Result
			if _, err := engine.Step(&o, at, states, &res); err != nil {
				t.Fatalf("trace %d (%v): Step(%s): %v", i, l, o.Kind, err)
			}
			return res
		}
		capa := cl.Capacity
		// Some usage before, on both.
		for range rng.IntN(3) {
			o := engine.Op{Plan: plan, Key: "k", Kind: engine.Charge, Cost: 1 + rng.Int64N(capa)}
			apply(with, o, now)
			apply(without, o, now)
			now += step()
		}
		cost := 1 + rng.Int64N(capa)
		back := cost
		if rng.IntN(3) == 0 {
			back = 1 + rng.Int64N(cost)
		}
		res := apply(with, engine.Op{Plan: plan, Key: "k", Kind: engine.Take, Cost: cost}, now)
		if !res.Allowed {
			continue
		}
		if back < cost { // the rest stands: the oracle is charged it, where it was made
			apply(without, engine.Op{Plan: plan, Key: "k", Kind: engine.Charge, Cost: cost - back}, now)
		}
		rc := engine.ReceiptOf(&res, cost)
		between := rng.IntN(4)
		for range between {
			now += step()
			o := engine.Op{Plan: plan, Key: "k", Kind: engine.Charge, Cost: 1 + rng.Int64N(capa)}
			apply(with, o, now)
			apply(without, o, now)
		}
		now += step()
		apply(with, engine.Op{Plan: plan, Key: "k", Kind: engine.Refund, Cost: back, Receipt: &rc}, now)
		rated := l.Algorithm == core.TokenBucket || l.Algorithm == core.GCRA || l.Algorithm == core.LeakyBucket
		exact := back == cost && (between == 0 && rc.At == now || !rated)
		for range 6 {
			c := 1 + rng.Int64N(capa)
			w := apply(with, engine.Op{Plan: plan, Key: "k", Kind: engine.Peek, Cost: c}, now)
			o := apply(without, engine.Op{Plan: plan, Key: "k", Kind: engine.Peek, Cost: c}, now)
			if w.Allowed && !o.Allowed {
				t.Fatalf("trace %d (%v): a refund of %d of a charge of %d, %d charges between: Peek(%d) at +%dµs admits, without the charge it does not",
					i, l, back, cost, between, c, now-rc.At)
			}
			if exact && w.Allowed != o.Allowed {
				t.Fatalf("trace %d (%v): an exact refund: Peek(%d) at +%dµs = %t, without the charge %t", i, l, c, now-rc.At, w.Allowed, o.Allowed)
			}
			now += step()
		}
	}
}
