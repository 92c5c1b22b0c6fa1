package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// Decisions on existing keys take only their entry's lock (entry.quick,
// and TakeBrief for half the workers' Takes of one limit), beside operations that take the shard's: keys created, reset (removed),
// extended in other scopes, laid out for another plan (a Peek of another
// plan in the same scope moves the states) and swept, all at once. Every
// key still admits exactly its limit, in each of its three scopes (one of
// two limits), and the heap and the table agree at the end. Run with
// -race, this is also the test of the locking itself.
func TestConcurrentDecisionsStayExact(t *testing.T) {
	const keys, workers, perKey = 40, 8, 60
	// The store's clock stands still (sweeps read it too): the limits
	// never refill, and no key expires.
	s := New(WithSweepInterval(0), WithShards(4), WithClock(&manualClock{t: epoch}))
	defer s.Close()
	fixed := planOf("a", core.PerHour(100).WithAlgorithm(core.FixedWindow))
	gcra := planOf("b", core.PerHour(150).WithAlgorithm(core.GCRA).WithBurst(150))
	doomed := planOf("c", core.PerHour(5))
	two := planOf("m", core.PerHour(200), core.PerDay(90).WithAlgorithm(core.GCRA))
	other := planOf("m", core.PerDay(90).WithAlgorithm(core.GCRA)) // two's second layout, alone
	var allowed [keys][3]atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range keys * perKey {
				k := r.IntN(keys)
				for j, p := range []*engine.Plan{fixed, gcra, two} {
					key := fmt.Sprint("k", k)
					var ok bool
					var err error
					if w%2 == 1 && len(p.Limits) == 1 { // a Limiter's path (TakeBrief) beside Apply's
						ok, _, _, _, _, _, _, err = s.TakeBrief(context.Background(), p, key, 1)
					} else {
						var res engine.Result
						res, err = s.Apply(context.Background(), engine.Op{Plan: p, Key: key, Cost: 1})
						ok = res.Allowed
					}
					if err != nil {
						t.Errorf("plan %s, key %s: %v", p.Scope, key, err)
						return
					}
					if ok {
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
			if _, err := s.Apply(context.Background(), engine.Op{Plan: other, Key: k, Kind: engine.Peek}); err != nil {
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
		if a, b, c := allowed[k][0].Load(), allowed[k][1].Load(), allowed[k][2].Load(); a != 100 || b != 150 || c != 90 {
			t.Errorf("key k%d admitted %d, %d and %d, want 100, 150 and 90", k, a, b, c)
		}
	}
	checkHeap(t, s, "after the decisions")
}

// A flood of new keys into a small store, evicting, while other callers
// decide on keys that exist: nothing is lost that a decision relies on,
// and the store keeps its bound and its heap. For plans of one limit and
// of two, which both decide under the key's lock alone.
func TestConcurrentDecisionsBesideEvictions(t *testing.T) {
	for _, limits := range [][]core.Limit{
		{core.PerHour(1_000_000)},
		{core.PerHour(1_000_000), core.PerDay(2_000_000).WithAlgorithm(core.GCRA)},
	} {
		t.Run(fmt.Sprint(len(limits), " limits"), func(t *testing.T) { decideBesideEvictions(t, limits) })
	}
}

func decideBesideEvictions(t *testing.T, limits []core.Limit) {
	const maxKeys = 256
	s := New(WithSweepInterval(0), WithShards(1), WithMaxKeys(maxKeys), WithClock(&manualClock{t: epoch}))
	defer s.Close()
	lim := planOf("", limits...)
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
				var err error
				if w%2 == 1 && len(limits) == 1 { // the flood through a Limiter's path: TakeBrief's misses
					_, _, _, _, _, _, _, err = s.TakeBrief(context.Background(), lim, key, 1)
				} else {
					_, err = s.Apply(context.Background(), engine.Op{Plan: lim, Key: key, Cost: 1})
				}
				if err != nil {
					t.Errorf("key %s: %v", key, err)
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

// An operation that removes its key (a Reset), or brings its expiry
// forward (a Refund), needs the shard's lock after deciding under its
// entry's: when another holds the shard, it waits for it and settles the
// key as it is then, as if it had held the shard all along. So a Reset
// forgets the key (a request whose clock read came a little earlier finds
// its whole quota, not a state "fresh" at a later instant), and a Refund
// brings the key's expiry forward in the heap. For plans of one limit and
// of two.
func TestAnOperationSettlesUnderItsShardWhenTheShardIsBusy(t *testing.T) {
	for _, limits := range [][]core.Limit{
		{core.PerSecond(10).WithAlgorithm(core.GCRA)},
		{core.PerSecond(10).WithAlgorithm(core.GCRA), core.PerMinute(100).WithAlgorithm(core.GCRA)},
	} {
		t.Run(fmt.Sprint(len(limits), " limits"), func(t *testing.T) { settlesWhenBusy(t, limits) })
	}
}

func settlesWhenBusy(t *testing.T, limits []core.Limit) {
	busy := func(s *Store, op engine.Op) engine.Result {
		t.Helper()
		s.shards[0].mu.Lock() // another key's insert, a sweep...
		time.AfterFunc(20*time.Millisecond, s.shards[0].mu.Unlock)
		res, err := s.Apply(context.Background(), op)
		if err != nil {
			t.Fatalf("%s: %v", op.Kind, err)
		}
		return res
	}
	t0 := epoch.UnixMicro()
	plan := planOf("", limits...)
	op := func(kind engine.Kind, cost, at int64) engine.Op {
		return engine.Op{Plan: plan, Key: "k", Kind: kind, Cost: cost, Now: at}
	}

	s := New(WithSweepInterval(0), WithShards(1))
	defer s.Close()
	if _, err := s.Apply(context.Background(), op(engine.Take, 3, t0)); err != nil {
		t.Fatal(err)
	}
	busy(s, op(engine.Reset, 0, t0+20_000))
	if n := s.Len(); n != 0 {
		t.Errorf("after a Reset while the shard was busy: %d keys, want 0", n)
	}
	if res, err := s.Apply(context.Background(), op(engine.Take, 10, t0+10_000)); err != nil || !res.Allowed {
		t.Errorf("a Take of the whole quota, its clock read before the Reset's: %+v, %v; want allowed", res, err)
	}

	s2 := New(WithSweepInterval(0), WithShards(1))
	defer s2.Close()
	if _, err := s2.Apply(context.Background(), op(engine.Take, 6, t0)); err != nil {
		t.Fatal(err)
	}
	res := busy(s2, op(engine.Refund, 4, t0))
	if res.Remaining != 8 {
		t.Errorf("after taking 6 and refunding 4: %d remaining, want 8", res.Remaining)
	}
	full := res.Reset // the key's time to full: its slowest limit's
	for _, l := range res.Limits {
		full = max(full, l.Reset)
	}
	e := s2.shards[0].t.get(hashKey(s2.seed, "k"), "k")
	if want := t0 + full; e == nil || e.expires != want {
		t.Errorf("after the Refund the key expires at %v, want %d (its time to full)", e, want)
	}
	checkHeap(t, s2, "after the refund")
}

// A decision on an existing key of a plan of several limits without logs
// takes only its entry's lock, as one of a single limit does: it goes on
// while another holds the shard's.
func TestSeveralLimitsDecideBesideABusyShard(t *testing.T) {
	s := New(WithSweepInterval(0), WithShards(1), WithClock(&manualClock{t: epoch}))
	defer s.Close()
	plan := planOf("", core.PerSecond(10), core.PerMinute(100).WithAlgorithm(core.GCRA), core.PerHour(1000).WithAlgorithm(core.TokenBucket))
	ctx := context.Background()
	if _, err := s.Apply(ctx, engine.Op{Plan: plan, Key: "k", Cost: 1}); err != nil {
		t.Fatal(err)
	}
	s.shards[0].mu.Lock()
	done := make(chan engine.Result, 1)
	go func() {
		res, err := s.Apply(ctx, engine.Op{Plan: plan, Key: "k", Cost: 1})
		if err != nil {
			t.Errorf("Apply: %v", err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		if !res.Allowed || res.Remaining != 8 {
			t.Errorf("second Take: %+v, want allowed with 8 remaining", res)
		}
	case <-time.After(10 * time.Second):
		t.Error("the decision waited for the shard's lock")
		s.shards[0].mu.Unlock()
		<-done
		return
	}
	s.shards[0].mu.Unlock()
}
