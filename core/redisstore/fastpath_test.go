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
	"github.com/tollgate/tollgate/core/memstore"
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
// limits with a log, more than maxFastLimits limits, and layouts past the
// store's bound run the generic script with it.
func TestSpecializedScripts(t *testing.T) {
	s := offlineStore(t)
	s.maxScripts = 2
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
		{"a third layout, past the store's bound of two, is not", []core.Limit{core.PerDay(7).WithAlgorithm(core.FixedWindow)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := core.Op{Kind: core.Take, Key: "k", Limits: tt.limits, Cost: 1}
			sc, _, args := s.command(&op)
			if got := sc != generic; got != tt.specialized {
				t.Fatalf("specialized = %v, want %v", got, tt.specialized)
			}
			if want := map[bool]int{true: 5, false: 6}[tt.specialized]; len(args) != want {
				t.Errorf("%d arguments, want %d", len(args), want)
			}
			again, _, _ := s.command(&op)
			if again != sc {
				t.Error("a second call with the same limits runs another script")
			}
			if sc == generic {
				return
			}
			if strings.Contains(sc.src, "ARGV[6]") {
				t.Error("the specialized script reads ARGV[6]")
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

// TestSpecializedScriptPerContent checks that equal limits in slices of
// their own (a WithLimitsFunc that builds its slice on every call) find
// one entry, and so one script, without allocating; and that concurrent
// first calls of as many sets as the bound all get a specialized script.
func TestSpecializedScriptPerContent(t *testing.T) {
	s := offlineStore(t)
	fresh := func() []core.Limit {
		return []core.Limit{core.PerSecond(10), core.PerHour(100).WithAlgorithm(core.GCRA).Named("h")}
	}
	first := s.params(fresh())
	if first.script == generic {
		t.Fatal("the limits run the generic script")
	}
	other := fresh()
	other[1].Name = "renamed" // names are not parameters
	if e := s.params(other); e != first {
		t.Fatalf("a fresh slice of the same limits has entry %p, want %p", e, first)
	}
	if n := testing.AllocsPerRun(100, func() { s.params(other) }); n != 0 {
		t.Errorf("params of a known set allocates %v times, want 0", n)
	}
	if s.argCount != 1 || s.scriptCount != 1 {
		t.Errorf("%d entries and %d scripts, want 1 and 1", s.argCount, s.scriptCount)
	}

	s.maxScripts = 5 // the first set and four more
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls := []core.Limit{core.PerMinute(int64(2 + g%4))}
			if e := s.params(ls); e.script == generic {
				t.Errorf("limits %v run the generic script while the bound is not reached", ls)
			}
		}()
	}
	wg.Wait()
	if s.scriptCount != 5 {
		t.Errorf("%d scripts, want 5", s.scriptCount)
	}
}

// TestSpecializedScriptSharedAcrossStores checks that two stores (two
// processes of a fleet) with the same limits and margin run the same
// script, so that the server keeps one copy.
func TestSpecializedScriptSharedAcrossStores(t *testing.T) {
	limits := []core.Limit{core.PerMinute(100), core.PerHour(1000)}
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
	if sc, _, _ := s.command(&core.Op{Kind: core.Take, Key: "k", Limits: limits, Cost: 1}); sc == generic {
		t.Fatal("the limits run the generic script")
	}
	ops := []core.Op{
		{Kind: core.Take, Limits: limits, Cost: 3},
		{Kind: core.Charge, Limits: limits, Cost: 4},
		{Kind: core.Take, Limits: other, Cost: 2}, // the key now holds two layouts
		{Kind: core.Take, Limits: limits, Cost: 1},
		{Kind: core.Refund, Limits: limits, Cost: 2},
		{Kind: core.Peek, Limits: limits, Cost: 9},
		{Kind: core.Reset, Limits: limits},
		{Kind: core.Take, Limits: limits, Cost: 10},
	}
	ms := memstore.New(memstore.WithSweepInterval(0))
	defer ms.Close()
	for i, op := range ops {
		op.Key, op.Now = "general path", now.Add(time.Duration(i)*100*time.Millisecond)
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
