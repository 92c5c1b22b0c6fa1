package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/storetest"
)

// Keys shared by plans of several layouts, and by scopes: limits of other
// algorithms and numbers, equal limits in plans apart, a plan of two
// limits of one layout, a limit with a log. memstore decides every
// operation as the engine does on a model that keeps one state per key,
// scope, layout and rank (the place of a limit among its plan's limits of
// that layout): the same Results, field by field, and the same errors,
// with the clock moving on and sometimes back. Like the store, the model
// forgets a key's states in a scope once the operation leaves all of them
// fully replenished (keep 0): with a clock that steps back, a remembered
// state can still owe what a forgotten one does not. The storetest suite
// runs one plan per trace; this is what holds a key's states together
// when plans mix.
func TestMixedLayoutsMatchAModel(t *testing.T) {
	second := core.PerSecond(5)
	gcra := core.PerMinute(20).WithAlgorithm(core.GCRA)
	plans := []*engine.Plan{
		planOf("", second),
		storetest.Plan("", second), // equal limits, another plan
		planOf("", gcra),
		planOf("", second, gcra),
		planOf("", second, second),
		planOf("", core.PerSecond(3).WithAlgorithm(core.TokenBucket), core.PerHour(40).WithAlgorithm(core.FixedWindow)),
		planOf("", core.PerSecond(4).WithAlgorithm(core.SlidingLog)),
		planOf("other", second, gcra),
	}
	kinds := []engine.Kind{engine.Take, engine.Take, engine.Take, engine.Peek, engine.Charge, engine.Refund, engine.Reset}
	clock := &manualClock{t: epoch}
	s := New(WithSweepInterval(0), WithClock(clock))
	defer s.Close()
	model := map[string]engine.State{}   // by key, scope, layout and rank
	held := map[string]map[string]bool{} // the model's ids of each key and scope
	r := rand.New(rand.NewPCG(3, 5))
	for i := range 20_000 {
		if r.IntN(20) == 0 {
			clock.t = clock.t.Add(-time.Duration(r.IntN(50)) * time.Millisecond)
		} else {
			clock.t = clock.t.Add(time.Duration(r.IntN(300)) * time.Millisecond)
		}
		p := plans[r.IntN(len(plans))]
		op := engine.Op{Plan: p, Key: fmt.Sprint("k", r.IntN(4)), Kind: kinds[r.IntN(len(kinds))], Cost: r.Int64N(4)}
		got, gotErr := s.Apply(context.Background(), op)

		now := clock.t.UnixMicro()
		ids := make([]string, len(p.Limits))
		states := make([]engine.State, len(p.Limits))
		for j, l := range p.Limits {
			rank := 0
			for _, m := range p.Limits[:j] {
				if m.Ident == l.Ident {
					rank++
				}
			}
			ids[j] = fmt.Sprint(op.Key, "|", p.Scope, "|", l.Ident, "|", rank)
			states[j] = model[ids[j]]
		}
		var want engine.Result
		mop := op
		mop.Now = now
		keep, wantErr := engine.Step(&mop, now, states, &want)
		ks := op.Key + "|" + p.Scope
		if held[ks] == nil {
			held[ks] = map[string]bool{}
		}
		others := false // states of the key and scope that the op did not step
		for id := range held[ks] {
			others = others || !slices.Contains(ids, id)
		}
		switch {
		case wantErr != nil:
		case keep == 0 && !others: // the store forgets them, or never kept them
			for _, id := range ids {
				delete(model, id)
				delete(held[ks], id)
			}
		default:
			for j, id := range ids {
				model[id] = states[j]
				held[ks][id] = true
			}
		}
		if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d, %s of %d on %s (plan %d):\nstore %+v, %v\nmodel %+v, %v", i, op.Kind, op.Cost, op.Key, indexOf(plans, p), got, gotErr, want, wantErr)
		}
	}
}

func indexOf(plans []*engine.Plan, p *engine.Plan) int {
	for i, q := range plans {
		if q == p {
			return i
		}
	}
	return -1
}
