package lease

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
)

// A Take decided under the lock spends its whole cost or nothing, while
// fast Takes spend the same lots without the lock: the units admitted
// never exceed the units held.
func TestSpendIsAllOrNothingBesideFastTakes(t *testing.T) {
	s, err := New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan, err := engine.NewPlan("", []engine.Limit{mustCompile(t, core.PerSecond(1000))})
	if err != nil {
		t.Fatal(err)
	}
	const now, front, back, cost, fasts = 1_000_000, 4, 4, 6, 4
	for round := range 2000 {
		a := &allowance{s: s, plan: plan, key: "k", remaining: -1}
		a.insert(lot{n: front, end: now + 10_000})
		a.insert(lot{n: back, end: now + 20_000})
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range fasts {
			wg.Go(func() {
				<-start
				for {
					if _, ok := a.fast(1, now, now); !ok {
						return
					}
					admitted.Add(1)
				}
			})
		}
		close(start)
		a.mu.Lock()
		if a.held() >= cost && a.spend(cost) {
			admitted.Add(cost)
		}
		a.mu.Unlock()
		wg.Wait()
		if got := admitted.Load(); got > front+back {
			t.Fatalf("round %d: %d units admitted from %d held", round, got, front+back)
		}
	}
}

func mustCompile(t *testing.T, l core.Limit) engine.Limit {
	t.Helper()
	c, err := engine.Compile(engine.Spec{Algorithm: engine.Algorithm(l.Algorithm), Quota: l.Quota, Period: l.Period, Burst: l.Burst})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
