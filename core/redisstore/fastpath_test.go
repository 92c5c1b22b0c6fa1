package redisstore

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/storetest"
)

// offlineStore returns a store whose client reaches no server, for tests
// that do no I/O.
func offlineStore(t *testing.T) *Store {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { c.Close() })
	s, err := New(c, WithBatching(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSpecializedScripts checks which limits get a script of their own: a
// Limiter's limits without logs do, sent without the parameters argument;
// limits with a log, more than maxFastLimits limits, and
// layouts past the store's bound run the generic script with it.
func TestSpecializedScripts(t *testing.T) {
	s := offlineStore(t)
	s.maxScripts = 3
	gcra := core.PerSecond(10).WithAlgorithm(core.GCRA)
	many := make([]core.Limit, maxFastLimits+1)
	for i := range many {
		many[i] = core.Per(int64(i+1), time.Second)
	}
	tests := []struct {
		name        string
		limits      []core.Limit
		specialized bool
	}{
		{"one GCRA limit is specialized", []core.Limit{gcra}, true},
		{"a sliding log is not", []core.Limit{core.PerMinute(5).WithAlgorithm(core.SlidingLog)}, false},
		{"a bucketed window among others is not", []core.Limit{gcra, core.PerMinute(5).WithAlgorithm(core.BucketedWindow)}, false},
		{"more than maxFastLimits limits are not", many, false},
		{"three limits of mixed algorithms are", []core.Limit{gcra, core.PerMinute(100), core.PerHour(1000).WithAlgorithm(core.TokenBucket)}, true},
		{"a wide limit is", []core.Limit{core.PerHour(1_000_000_000).WithAlgorithm(core.GCRA)}, true},
		{"a fourth layout, past the store's bound of three, is not", []core.Limit{core.PerDay(7).WithAlgorithm(core.FixedWindow)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := engine.Op{Plan: planOf("", tt.limits...), Kind: engine.Take, Key: "k", Cost: 1}
			sc, _, args := s.command(&op)
			if got := sc != generic; got != tt.specialized {
				t.Fatalf("specialized = %v, want %v", got, tt.specialized)
			}
			if want := map[bool]int{true: 1, false: 2}[tt.specialized]; len(args) != want {
				t.Errorf("%d arguments, want %d", len(args), want)
			}
			again, _, _ := s.command(&op)
			if again != sc {
				t.Error("a second call with the same limits runs another script")
			}
			if sc == generic {
				return
			}
			if strings.Contains(sc.src, "ARGV[2]") {
				t.Error("the specialized script names ARGV[2]: its parameters are in its text, and a receipt is ARGV[#ARGV]")
			}
			for line := range strings.Lines(sc.src) {
				if strings.HasPrefix(strings.TrimSpace(line), "--") {
					t.Errorf("the specialized script keeps the comment line %q", line)
					break
				}
			}
		})
	}
}

// TestSpecializedScriptPerPlan checks that a plan finds what the store
// derived from it without allocating, that plans of equal limits (two
// Limiters configured alike) share one script, and that concurrent first
// calls of as many sets of limits as the bound all get a specialized
// script, and no more.
func TestSpecializedScriptPerPlan(t *testing.T) {
	s := offlineStore(t)
	fresh := func() *engine.Plan {
		return storetest.Plan("", core.PerSecond(10), core.PerHour(100).WithAlgorithm(core.GCRA).Named("h"))
	}
	p := fresh()
	first := s.prepare(p)
	if first.script == generic {
		t.Fatal("the limits run the generic script")
	}
	if n := testing.AllocsPerRun(100, func() { s.prepare(p) }); n != 0 {
		t.Errorf("prepare of a known plan allocates %v times, want 0", n)
	}
	if other := s.prepare(fresh()); other.script != first.script {
		t.Fatalf("another plan of the same limits runs script %p, want %p", other.script, first.script)
	}
	if len(s.scripts) != 1 {
		t.Errorf("%d scripts, want 1", len(s.scripts))
	}

	s.maxScripts = 5 // the first set and four more
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := storetest.Plan("", core.PerMinute(int64(2+g%4)))
			if pp := s.prepare(p); pp.script == generic {
				t.Errorf("limits %v run the generic script while the bound is not reached", p.Limits)
			}
		}()
	}
	wg.Wait()
	if len(s.scripts) != 5 {
		t.Errorf("%d scripts, want 5", len(s.scripts))
	}
	if pp := s.prepare(storetest.Plan("", core.PerMinute(99))); pp.script != generic {
		t.Error("a sixth set of limits got a specialized script past the bound of 5")
	}
}

// TestSpecializedScriptSharedAcrossStores checks that two stores (two
// processes of a fleet) with the same limits and margin run the same
// script, so that the server keeps one copy.
func TestSpecializedScriptSharedAcrossStores(t *testing.T) {
	limits := storetest.Plan("", core.PerMinute(100), core.PerHour(1000)).Limits
	params, _ := formatParams(limits, 1000)
	a, b := specialize(limits, params, 1000), specialize(slices.Clone(limits), params, 1000)
	if a == nil || a.sha != b.sha {
		t.Fatalf("specialize gave scripts %v and %v, want one", a, b)
	}
	other, _ := formatParams(limits, 2000)
	if c := specialize(limits, other, 2000); c.sha == a.sha {
		t.Error("another margin gives the same script")
	}
}

// TestSpecializedScriptGeneralPath runs operations the fast path leaves to
// the general one (Charge, Refund, Reset, a key holding another layout's
// state) through a specialized script, whose general path reads the
// parameters written in its text, and holds them to memstore's decisions.
func TestSpecializedScriptGeneralPath(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	now := time.UnixMicro(1_700_000_000_000_000)
	limits := []core.Limit{core.PerSecond(10).WithAlgorithm(core.GCRA), core.PerMinute(20)}
	other := []core.Limit{core.PerHour(30).WithAlgorithm(core.TokenBucket)}
	if sc, _, _ := s.command(&engine.Op{Plan: planOf("", limits...), Kind: engine.Take, Key: "k", Cost: 1}); sc == generic {
		t.Fatal("the limits run the generic script")
	}
	lp, op2 := planOf("", limits...), planOf("", other...)
	ops := []engine.Op{{Plan: lp, Kind: engine.Take, Cost: 3},
		{Plan: lp, Kind: engine.Charge, Cost: 4},
		{Plan: op2, Kind: engine.Take, Cost: 2}, // the key now holds two layouts
		{Plan: lp, Kind: engine.Take, Cost: 1},
		{Plan: lp, Kind: engine.Refund, Cost: 2},
		{Plan: lp, Kind: engine.Peek, Cost: 9},
		{Plan: lp, Kind: engine.Reset},
		{Plan: lp, Kind: engine.Take, Cost: 10}}
	ms := memstore.New(memstore.WithSweepInterval(0))
	defer ms.Close()
	for i, op := range ops {
		op.Key, op.Now = "general path", now.Add(time.Duration(i)*100*time.Millisecond).UnixMicro()
		want, werr := ms.Apply(ctx, op)
		got, err := s.Apply(ctx, op)
		if err != nil || werr != nil {
			t.Fatalf("op %d %s: %v (memstore %v)", i, op.Kind, err, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("op %d %s(%d):\n redis    %+v\n memstore %+v", i, op.Kind, op.Cost, got, want)
		}
	}
}
