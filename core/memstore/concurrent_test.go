package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// Decisions on existing keys take only their entry's lock (entry.quick),
// beside operations that take the shard's: keys created, reset (removed),
// extended in other scopes and swept, all at once. Every key still admits
// exactly its limit, in each of its two scopes, and the heap and the table
// agree at the end. Run with -race, this is also the test of the locking
// itself.
func TestConcurrentDecisionsStayExact(t *testing.T) {
	const keys, workers, perKey = 40, 8, 60
	// The store's clock stands still (sweeps read it too): the limits
	// never refill, and no key expires.
	s := New(WithSweepInterval(0), WithShards(4), WithClock(&manualClock{t: epoch}))
	defer s.Close()
	fixed := planOf("a", core.PerHour(100).WithAlgorithm(core.FixedWindow))
	gcra := planOf("b", core.PerHour(150).WithAlgorithm(core.GCRA).WithBurst(150))
	doomed := planOf("c", core.PerHour(5))
	var allowed [keys][2]atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range keys * perKey {
				k := r.IntN(keys)
				for j, p := range []*engine.Plan{fixed, gcra} {
					res, err := s.Apply(context.Background(), engine.Op{Plan: p, Key: fmt.Sprint("k", k), Cost: 1})
					if err != nil {
						t.Errorf("Apply: %v", err)
						return
					}
					if res.Allowed {
						allowed[k][j].Add(1)
					}
				}
			}
		}()
	}
	var churn sync.WaitGroup
	churn.Add(1)
	go func() { // keys that come and go beside them: created, reset, swept
		defer churn.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprint("k", i%keys)
			kind := engine.Take
			if i%3 == 0 {
				kind = engine.Reset
			}
			if _, err := s.Apply(context.Background(), engine.Op{Plan: doomed, Key: k, Kind: kind, Cost: 1}); err != nil {
				t.Errorf("churn: %v", err)
				return
			}
			if i%50 == 0 {
				s.Sweep()
			}
		}
	}()
	wg.Wait()
	close(stop)
	churn.Wait()
	for k := range keys {
		// Each key was asked about 8 × 60 = 480 times in each scope,
		// well past both limits.
		if a, b := allowed[k][0].Load(), allowed[k][1].Load(); a != 100 || b != 150 {
			t.Errorf("key k%d admitted %d and %d, want 100 and 150", k, a, b)
		}
	}
	checkHeap(t, s, "after the decisions")
}

// A flood of new keys into a small store, evicting, while other callers
// decide on keys that exist: nothing is lost that a decision relies on,
// and the store keeps its bound and its heap.
func TestConcurrentDecisionsBesideEvictions(t *testing.T) {
	const maxKeys = 256
	s := New(WithSweepInterval(0), WithShards(1), WithMaxKeys(maxKeys), WithClock(&manualClock{t: epoch}))
	defer s.Close()
	lim := planOf("", core.PerHour(1_000_000))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20_000 {
				key := fmt.Sprint("w", w, ":", i%64) // existing keys, mostly
				if w%2 == 1 {
					key = fmt.Sprint("flood", w, ":", i) // new keys: evictions
				}
				if _, err := s.Apply(context.Background(), engine.Op{Plan: lim, Key: key, Cost: 1}); err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := s.Len(); n > maxKeys {
		t.Errorf("%d keys, want at most %d", n, maxKeys)
	}
	if s.Evictions() == 0 {
		t.Error("no evictions: the flood did not fill the store")
	}
	checkHeap(t, s, "after the flood")
}

// An operation that would remove its key, or bring its expiry forward,
// while another holds the shard's lock, is decided all the same, without
// waiting for the shard: the entry keeps its later expiry, and goes then.
func TestAQuickOperationDoesNotWaitForItsShard(t *testing.T) {
	clock := &manualClock{t: epoch}
	s := New(WithSweepInterval(0), WithShards(1), WithClock(clock))
	defer s.Close()
	lim := core.PerMinute(10).WithAlgorithm(core.FixedWindow)
	for range 4 {
		take(t, s, "k", lim)
	}
	sh := &s.shards[0]
	e := sh.t.get(maphash.String(s.seed, "k"), "k")
	before := e.expires
	sh.mu.Lock() // another operation holds the shard
	done := make(chan engine.Result)
	go func() {
		res, err := s.Apply(context.Background(), engine.Op{Plan: planOf("", lim), Key: "k", Kind: engine.Refund, Cost: 4})
		if err != nil {
			t.Errorf("Refund: %v", err)
		}
		done <- res
	}()
	var res engine.Result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		sh.mu.Unlock()
		t.Fatal("the Refund waited for the shard's lock")
	}
	sh.mu.Unlock()
	if res.Remaining != 10 {
		t.Errorf("after refunding all 4 units: %d remaining, want 10", res.Remaining)
	}
	if e.dead || e.expires != before {
		t.Errorf("the entry is dead %v, expires %d; want it kept, expiring at %d as before", e.dead, e.expires, before)
	}
	if d := take(t, s, "k", lim); d.Remaining != 9 {
		t.Errorf("a Take after the refund: %d remaining, want 9", d.Remaining)
	}
	checkHeap(t, s, "after the refund")
	clock.t = clock.t.Add(2 * time.Minute)
	s.Sweep()
	if n := s.Len(); n != 0 {
		t.Errorf("%d keys after the key's expiry and a sweep, want 0", n)
	}
}
