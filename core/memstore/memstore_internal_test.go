package memstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/storetest"
)

// manualClock is a clock tests move by hand.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time { return c.t }

var epoch = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func peek(t testing.TB, s *Store, key string, limits ...core.Limit) engine.Result {
	t.Helper()
	d, err := s.Apply(context.Background(), engine.Op{Plan: planOf("", limits...), Kind: engine.Peek, Key: key})
	if err != nil {
		t.Fatalf("Apply(Peek, %.40q) error: %v", key, err)
	}
	return d
}

func take(t testing.TB, s *Store, key string, limits ...core.Limit) engine.Result {
	t.Helper()
	d, err := s.Apply(context.Background(), engine.Op{Plan: planOf("", limits...), Key: key, Cost: 1})
	if err != nil {
		t.Fatalf("Apply(%.40q) error: %v", key, err)
	}
	return d
}

func TestFloodOfDistinctKeysStaysUnderMaxKeys(t *testing.T) {
	const maxKeys, flood = 20_000, 200_000
	clock := &manualClock{t: epoch}
	s := New(WithMaxKeys(maxKeys), WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	lim := core.PerHour(10)
	var buf []byte
	for i := range flood {
		buf = fmt.Appendf(buf[:0], "flood-%d", i)
		take(t, s, string(buf), lim)
		if i%10_000 == 0 {
			clock.t = clock.t.Add(time.Millisecond)
			if n := s.Len(); n > maxKeys {
				t.Fatalf("after %d keys Len() = %d, want ≤ %d", i+1, n, maxKeys)
			}
		}
	}
	if n := s.Len(); n > maxKeys || n < maxKeys/2 {
		t.Errorf("after %d distinct keys Len() = %d, want ≤ %d (and not far below)", flood, n, maxKeys)
	}
	if ev := s.Evictions(); ev < flood-maxKeys {
		t.Errorf("Evictions() = %d, want ≥ %d", ev, flood-maxKeys)
	}
	// The newest key is still there: no insert came after it to evict it.
	d := take(t, s, fmt.Sprintf("flood-%d", flood-1), lim)
	if d.Remaining != 8 {
		t.Errorf("the newest flood key lost its state: Remaining = %d, want 8", d.Remaining)
	}
}

// The bug this guards against: eviction by soonest expiry evicted an old
// exhausted key of a window algorithm, whose window ends before a fresh
// key's, and so gave it its whole quota back.
func TestAFloodCannotBuyAnExhaustedKeyItsQuotaBack(t *testing.T) {
	const maxKeys, flood = 10_000, 10 * 10_000
	for _, alg := range []core.Algorithm{core.SlidingWindow, core.FixedWindow, core.GCRA, core.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			clock := &manualClock{t: epoch.Add(time.Minute)}
			s := New(WithMaxKeys(maxKeys), WithClock(clock), WithSweepInterval(0))
			defer s.Close()
			lim := core.PerHour(10).WithAlgorithm(alg)
			for range 10 {
				take(t, s, "exhausted", lim)
			}
			if d := take(t, s, "exhausted", lim); d.Allowed {
				t.Fatalf("AllowN(exhausted, 1) after 10 of 10 = allowed, want denied")
			}
			// One request per key, a millisecond apart: 100 s in all, less
			// than a token's refill (6 min) and inside the hour's window.
			var buf []byte
			for i := range flood {
				clock.t = clock.t.Add(time.Millisecond)
				buf = fmt.Appendf(buf[:0], "flood-%d", i)
				take(t, s, string(buf), lim)
				if n := s.Len(); n > maxKeys {
					t.Fatalf("after %d flood keys Len() = %d, want ≤ %d", i+1, n, maxKeys)
				}
			}
			if d := take(t, s, "exhausted", lim); d.Allowed {
				t.Errorf("after a flood of %d keys AllowN(exhausted, 1) = allowed (Remaining %d), want denied", flood, d.Remaining)
			}
			// No flood key is replenished within the flood, so every
			// eviction forgot usage.
			evicted := int64(1 + flood - s.Len())
			if ev, lossy := s.Evictions(), s.LossyEvictions(); ev != evicted || lossy != evicted {
				t.Errorf("Evictions(), LossyEvictions() = %d, %d; want %d and %d (1 + %d keys, %d left)", ev, lossy, evicted, evicted, flood, s.Len())
			}
		})
	}
}

// Lossless first: while a shard holds an expired key, no live key is
// evicted, however unlucky the sample.
func TestExpiredKeysAreEvictedBeforeAnyLiveOne(t *testing.T) {
	const maxKeys = 1000
	clock := &manualClock{t: epoch}
	s := New(WithMaxKeys(maxKeys), WithShards(1), WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	short, long := core.PerSecond(10), core.PerHour(10)
	for i := range maxKeys / 2 {
		take(t, s, fmt.Sprintf("short-%d", i), short)
		take(t, s, fmt.Sprintf("live-%d", i), long)
	}
	if n, ev := s.Len(), s.Evictions(); n != maxKeys || ev != 0 {
		t.Fatalf("after %d keys Len(), Evictions() = %d, %d; want %d and 0", maxKeys, n, ev, maxKeys)
	}
	clock.t = clock.t.Add(3 * time.Second) // the per-second keys are replenished after 2 s
	for i := range maxKeys / 2 {
		take(t, s, fmt.Sprintf("new-%d", i), long)
	}
	if ev, lossy := s.Evictions(), s.LossyEvictions(); ev != maxKeys/2 || lossy != 0 {
		t.Errorf("after %d new keys in place of %d expired ones: Evictions(), LossyEvictions() = %d, %d; want %d and 0", maxKeys/2, maxKeys/2, ev, lossy, maxKeys/2)
	}
	for i := range maxKeys / 2 {
		key := fmt.Sprintf("live-%d", i)
		if d := peek(t, s, key, long); d.Remaining != 9 {
			t.Fatalf("PeekN(%s, 0).Remaining = %d, want 9: a live key was evicted while expired ones remained", key, d.Remaining)
		}
	}
	// Every key is live now: room for one more costs one lossy eviction.
	take(t, s, "one-more", long)
	if ev, lossy, n := s.Evictions(), s.LossyEvictions(), s.Len(); ev != maxKeys/2+1 || lossy != 1 || n != maxKeys {
		t.Errorf("then one more key: Evictions(), LossyEvictions(), Len() = %d, %d, %d; want %d, 1, %d", ev, lossy, n, maxKeys/2+1, maxKeys)
	}
}

// With a bound of evictSample keys in one shard, every eviction samples
// every key, so which key goes is decided by the policy alone.
func TestEvictionForgetsTheLeastInDebt(t *testing.T) {
	type use struct {
		key  string
		at   time.Duration // since epoch
		lim  core.Limit
		cost int64
	}
	hour := core.PerHour(10)
	minute := core.PerMinute(10)
	fixed := core.PerMinute(10).WithAlgorithm(core.FixedWindow)
	heavy := func(at time.Duration, lim core.Limit) []use { // seven keys, each 8 of 10 used
		var us []use
		for i := range 7 {
			us = append(us, use{fmt.Sprintf("heavy-%d", i), at, lim, 8})
		}
		return us
	}
	for _, tc := range []struct {
		name    string
		uses    []use // in order; the last one arrives at a full shard
		evicted string
	}{
		{
			name:    "a newcomer evicts the key least in debt",
			uses:    append(heavy(0, hour), use{"light", 0, hour, 3}, use{"newcomer", 0, hour, 1}),
			evicted: "light",
		},
		{
			name:    "a flood's keys evict each other, not the keys in debt",
			uses:    append(heavy(0, hour)[:6], use{"exhausted", 0, hour, 10}, use{"flood-1", 0, hour, 1}, use{"flood-2", 0, hour, 1}),
			evicted: "flood-1",
		},
		{
			name: "debt is usage at eviction time, not when the key was last used",
			// 10 of 10 a window ago weighs 10 × 15/60 now; the heavy keys 8.
			uses:    append(heavy(105*time.Second, minute), use{"old", 30 * time.Second, minute, 10}, use{"newcomer", 105 * time.Second, minute, 1}),
			evicted: "old",
		},
		{
			name:    "among keys equally in debt, the one replenished soonest goes",
			uses:    append(heavy(90*time.Second, minute)[:6], use{"old", 30 * time.Second, minute, 10}, use{"young", 90 * time.Second, minute, 5}, use{"newcomer", 90 * time.Second, minute, 1}),
			evicted: "old", // 10 × 30/60 = 5, like young's, but replenished a window earlier
		},
		{
			name: "a key in debt under another layout of its scope is kept",
			// "multi" owes 10 of 10 per hour, and uses 1 of 10 per minute.
			uses:    append(heavy(0, hour)[:6], use{"light", 0, hour, 2}, use{"multi", 0, hour, 10}, use{"multi", 0, fixed, 1}, use{"newcomer", 0, hour, 1}),
			evicted: "light",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(WithMaxKeys(evictSample), WithShards(1), WithSweepInterval(0))
			defer s.Close()
			ctx := context.Background()
			for _, u := range tc.uses {
				op := engine.Op{Plan: planOf("", u.lim), Key: u.key, Cost: u.cost, Now: (epoch.Add(u.at)).UnixMicro()}
				if _, err := s.Apply(ctx, op); err != nil {
					t.Fatalf("Apply(%s, %d) error: %v", u.key, u.cost, err)
				}
			}
			keys := map[string]bool{}
			for k := range s.shards[0].t.all() {
				keys[k] = true
			}
			for _, u := range tc.uses {
				if got, want := keys[u.key], u.key != tc.evicted; got != want {
					t.Errorf("key %q kept = %v, want %v (the evicted key should be %q)", u.key, got, want, tc.evicted)
				}
			}
			if ev, lossy := s.Evictions(), s.LossyEvictions(); ev != 1 || lossy != 1 {
				t.Errorf("Evictions(), LossyEvictions() = %d, %d; want 1 and 1", ev, lossy)
			}
		})
	}
}

// checkHeap fails the test unless every shard's heap holds exactly the
// shard's entries, in heap order, each placed no later than its expiry.
func checkHeap(t *testing.T, s *Store, where string) {
	t.Helper()
	for i := range s.shards {
		sh := &s.shards[i]
		entries := 0
		for k, head := range sh.t.all() {
			for e := head; e != nil; e = e.next() {
				entries++
				if e.key != k {
					t.Fatalf("%s: an entry under %q records its key as %q", where, k, e.key)
				}
				if int(e.slot) >= len(sh.heap) || sh.heap[e.slot].e != e {
					t.Fatalf("%s: the entry of %q is not at its slot %d of the heap", where, k, e.slot)
				}
			}
		}
		if entries != len(sh.heap) {
			t.Fatalf("%s: shard %d has %d entries and a heap of %d", where, i, entries, len(sh.heap))
		}
		for j, x := range sh.heap {
			if x.at > x.e.expires {
				t.Fatalf("%s: heap slot %d is at %d, after its entry expires (%d)", where, j, x.at, x.e.expires)
			}
			if p := (j - 1) / 2; j > 0 && sh.heap[p].at > x.at {
				t.Fatalf("%s: heap slot %d (at %d) is before its parent %d (at %d)", where, j, x.at, p, sh.heap[p].at)
			}
		}
	}
}

// Random operations of every kind, in two scopes, with layouts that come
// and go, a clock that sometimes steps back, sweeps and evictions: the
// expiry heap always matches the map.
func TestTheExpiryHeapMatchesTheMap(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	clock := &manualClock{t: epoch}
	s := New(WithMaxKeys(64), WithShards(1), WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	limits := [][]core.Limit{
		{core.PerSecond(3)},
		{core.PerMinute(5).WithAlgorithm(core.GCRA)},
		{core.PerSecond(10), core.PerMinute(50)},
		{core.Per(2, 100*time.Millisecond).WithAlgorithm(core.FixedWindow)},
	}
	kinds := []engine.Kind{engine.Take, engine.Take, engine.Take, engine.Peek, engine.Charge, engine.Refund, engine.Refund, engine.Reset}
	ctx := context.Background()
	for i := range 20_000 {
		switch x := r.IntN(100); {
		case x < 2:
			clock.t = clock.t.Add(-time.Duration(r.Int64N(int64(time.Second)))) // a step back
		case x < 98:
			clock.t = clock.t.Add(time.Duration(r.Int64N(int64(2 * time.Millisecond))))
		default:
			clock.t = clock.t.Add(time.Duration(r.Int64N(int64(3 * time.Second))))
		}
		op := engine.Op{
			Kind: kinds[r.IntN(len(kinds))],
			Plan: planOf([]string{"a", "b"}[r.IntN(2)], limits[r.IntN(len(limits))]...),
			Key:  fmt.Sprintf("k%d", r.IntN(400)),
			Cost: r.Int64N(4),
		}
		if _, err := s.Apply(ctx, op); err != nil {
			t.Fatalf("step %d: Apply(%s %s/%s) error: %v", i, op.Kind, op.Plan.Scope, op.Key, err)
		}
		if r.IntN(50) == 0 {
			s.Sweep()
		}
		checkHeap(t, s, fmt.Sprintf("step %d (%s %s/%s)", i, op.Kind, op.Plan.Scope, op.Key))
	}
	if s.Evictions() == 0 || s.LossyEvictions() == 0 || s.LossyEvictions() == s.Evictions() {
		t.Errorf("Evictions(), LossyEvictions() = %d, %d; want both kinds of eviction exercised", s.Evictions(), s.LossyEvictions())
	}
}

func TestMemoryPerKey(t *testing.T) {
	const n = 200_000
	measure := func(limits ...core.Limit) float64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := New(WithSweepInterval(0), WithMaxKeys(n))
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("user:%08d", i)
		}
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, k := range keys {
			take(t, s, k, limits...)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(s)
		runtime.KeepAlive(keys)
		s.Close()
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	one := measure(core.PerMinute(100))
	three := measure(core.PerSecond(10), core.PerMinute(120), core.PerHour(240))
	t.Logf("memory per key (%d keys of 13 bytes): one limit %.0f B, three limits %.0f B", n, one, three)
	// One limit: a 128-byte entry holding a short key, its table slot (16
	// bytes, at most 3/4 of the slots in use) and its heap slot (16). The
	// bounds fail the layout before it (192-byte entries, the key apart,
	// 32-byte slots: 301 and 523 B).
	if one > 224 || three > 512 {
		t.Errorf("memory per key: one limit %.0f B, three limits %.0f B; want ≤ 224 and ≤ 512", one, three)
	}
}

func TestLongKeysAreHashedAndStayDistinct(t *testing.T) {
	s := New(WithSweepInterval(0), WithMaxKeyLen(64))
	defer s.Close()
	lim := core.PerHour(5)
	a := strings.Repeat("a", 10<<10)
	b := a[:len(a)-1] + "b"
	take(t, s, a, lim)
	take(t, s, a, lim)
	if d := take(t, s, b, lim); d.Remaining != 4 {
		t.Errorf("a 10 KB key differing in its last byte shares state: Remaining = %d, want 4", d.Remaining)
	}
	if d := take(t, s, a, lim); d.Remaining != 2 {
		t.Errorf("third Take of a 10 KB key: Remaining = %d, want 2", d.Remaining)
	}
	for i := range s.shards {
		for k := range s.shards[i].t.all() {
			if len(k) > 64 {
				t.Errorf("a stored key is %d bytes long, want hashed to ≤ 64", len(k))
			}
		}
	}
}

// A client who can choose its key may send the very string a long key is
// stored under, or the digest in any form: it must not share the long
// key's state.
func TestAHashedKeyCannotBeNamedByAShortOne(t *testing.T) {
	lim := core.PerHour(5)
	long := strings.Repeat("x", 1000)
	sum := sha256.Sum256([]byte(long))
	for _, tc := range []struct {
		name string
		key  func(stored string) string
	}{
		{"the string the long key is stored under", func(stored string) string { return stored }},
		{"the raw digest", func(string) string { return string(sum[:]) }},
		{"the digest behind a NUL prefix", func(string) string { return "\x00sha256:" + string(sum[:]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(WithSweepInterval(0), WithMaxKeyLen(64))
			defer s.Close()
			take(t, s, long, lim)
			take(t, s, long, lim)
			var stored []string
			for i := range s.shards {
				for k := range s.shards[i].t.all() {
					stored = append(stored, k)
				}
			}
			if len(stored) != 1 || len(stored[0]) > 64 {
				t.Fatalf("the store holds keys %q, want one of at most 64 bytes", stored)
			}
			short := tc.key(stored[0])
			if d := take(t, s, short, lim); d.Remaining != 4 {
				t.Errorf("AllowN(%q, 1) after two of the long key: Remaining = %d, want 4 (a key of its own)", short, d.Remaining)
			}
			if d := take(t, s, long, lim); d.Remaining != 2 {
				t.Errorf("third AllowN of the long key: Remaining = %d, want 2", d.Remaining)
			}
		})
	}
}

// Adapters may pass keys that alias a reused buffer (fasthttp does): the
// store must copy what it keeps.
func TestKeysAliasingAReusedBufferAreCopied(t *testing.T) {
	s := New(WithSweepInterval(0))
	defer s.Close()
	lim := core.PerHour(5)
	buf := []byte("alice")
	key := unsafe.String(&buf[0], len(buf))
	take(t, s, key, lim)
	copy(buf, "mallo")
	if d := take(t, s, "alice", lim); d.Remaining != 3 {
		t.Errorf("after the caller's buffer changed, alice's Remaining = %d, want 3", d.Remaining)
	}
}

func TestExpiredKeysAreSweptAndCloseStopsTheSweeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithSweepInterval(time.Second)) // synctest's fake time drives time.Now
		take(t, s, "a", core.PerSecond(5))
		take(t, s, "b", core.PerMinute(5))
		if n := s.Len(); n != 2 {
			t.Fatalf("Len() = %d, want 2", n)
		}
		time.Sleep(2500 * time.Millisecond) // "a" is replenished after 2 s (sliding window), swept at the next tick
		synctest.Wait()
		if n := s.Len(); n != 1 {
			t.Errorf("after 2.5 s Len() = %d, want 1 (the per-second key swept)", n)
		}
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if n := s.Len(); n != 0 {
			t.Errorf("after 3 min Len() = %d, want 0", n)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close() = %v", err)
		}
		// synctest fails the test if the sweeper goroutine is still running.
	})
}

func TestFullyReplenishedKeysAreDropped(t *testing.T) {
	clock := &manualClock{t: epoch}
	s := New(WithSweepInterval(0), WithClock(clock))
	defer s.Close()
	lim := core.PerMinute(5).WithAlgorithm(core.GCRA)
	ctx := context.Background()
	take(t, s, "k", lim)
	if _, err := s.Apply(ctx, engine.Op{Plan: planOf("", lim), Kind: engine.Refund, Key: "k", Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("after a full refund Len() = %d, want 0", n)
	}
	if _, err := s.Apply(ctx, engine.Op{Plan: planOf("", lim), Kind: engine.Peek, Key: "new"}); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("a Peek of an unknown key stored it: Len() = %d, want 0", n)
	}
}

func TestHotPathAllocatesNothing(t *testing.T) {
	s := New(WithSweepInterval(0))
	defer s.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		limit core.Limit
	}{
		{"allowed", core.PerSecond(1 << 30)},
		{"denied", core.PerHour(1)},
	} {
		for _, alg := range []core.Algorithm{core.SlidingWindow, core.FixedWindow, core.TokenBucket, core.GCRA} {
			op := engine.Op{Plan: planOf("", tc.limit.WithAlgorithm(alg)), Key: "hot", Cost: 1}
			s.Apply(ctx, op)
			if n := testing.AllocsPerRun(1000, func() { s.Apply(ctx, op) }); n != 0 {
				t.Errorf("%s %s: %v allocs per Apply of an existing key, want 0", tc.name, alg, n)
			}
		}
	}
}

// Two plans of equal limits (two Limiters configured alike) alternating on
// one key share its states: the store allocates nothing, the Result's parts
// of two limits going where the op says (engine.Op.Parts), as core's do.
func TestEqualPlansAllocateNothing(t *testing.T) {
	s := New(WithSweepInterval(0))
	defer s.Close()
	ctx := context.Background()
	mk := func() []core.Limit { return []core.Limit{core.PerSecond(1 << 30), core.PerHour(1 << 30)} }
	a, b := storetest.Plan("", mk()...), storetest.Plan("", mk()...)
	s.Apply(ctx, engine.Op{Plan: a, Key: "k", Cost: 1})
	i := 0
	parts := make([]engine.LimitResult, 2)
	if n := testing.AllocsPerRun(1000, func() {
		op := engine.Op{Plan: a, Key: "k", Cost: 1, Parts: parts}
		if i++; i%2 == 0 {
			op.Plan = b
		}
		s.Apply(ctx, op)
	}); n != 0 {
		t.Errorf("%v allocs per Apply alternating two plans of equal limits, want 0", n)
	}
}

// One key used by Limiters of three scopes: three entries, removed one by
// one as each is reset, and swept when all expire.
func TestScopesOfOneKeyAreChainedAndRemovedAlone(t *testing.T) {
	clock := &manualClock{t: epoch}
	s := New(WithSweepInterval(0), WithClock(clock))
	defer s.Close()
	ctx := context.Background()
	lim := []core.Limit{core.PerMinute(10)}
	for _, scope := range []string{"a", "b", "c"} {
		if _, err := s.Apply(ctx, engine.Op{Plan: planOf(scope, lim...), Key: "k", Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Len(); n != 3 {
		t.Fatalf("Len() = %d, want 3", n)
	}
	if _, err := s.Apply(ctx, engine.Op{Plan: planOf("b", lim...), Kind: engine.Reset, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 2 {
		t.Errorf("after resetting scope b: Len() = %d, want 2", n)
	}
	for _, scope := range []string{"a", "c"} {
		d, _ := s.Apply(ctx, engine.Op{Plan: planOf(scope, lim...), Kind: engine.Peek, Key: "k"})
		if d.Remaining != 9 {
			t.Errorf("scope %s after resetting b: Remaining = %d, want 9", scope, d.Remaining)
		}
	}
	clock.t = clock.t.Add(3 * time.Minute)
	if n := s.Sweep(); n != 2 || s.Len() != 0 {
		t.Errorf("Sweep() = %d, Len() = %d; want 2 and 0", n, s.Len())
	}
}

// A small bound still holds about that many keys (fewer shards), and a
// bound of zero or less is the default, not a store that forgets everyone.
func TestSmallAndZeroMaxKeys(t *testing.T) {
	lim := core.PerMinute(3)
	for _, tc := range []struct {
		max, keys, atLeast int
	}{{3, 10, 3}, {100, 200, 90}, {0, 5000, 5000}, {-1, 5000, 5000}} {
		s := New(WithMaxKeys(tc.max), WithSweepInterval(0))
		for i := range tc.keys {
			take(t, s, fmt.Sprintf("k%d", i), lim)
		}
		if n := s.Len(); n < tc.atLeast || (tc.max > 0 && n > tc.max) {
			t.Errorf("WithMaxKeys(%d) after %d keys: Len() = %d, want between %d and %d", tc.max, tc.keys, n, tc.atLeast, max(tc.max, tc.keys))
		}
		s.Close()
	}
}

// plans caches the plans of planOf, so that operations on the same limits
// share one plan, as a Limiter's do.
var plans sync.Map

// planOf returns the plan of limits in scope, as a core.Limiter prepares
// it (storetest.Plan), the same for equal arguments.
func planOf(scope string, limits ...core.Limit) *engine.Plan {
	k := fmt.Sprintf("%q %#v", scope, limits)
	if p, ok := plans.Load(k); ok {
		return p.(*engine.Plan)
	}
	p, _ := plans.LoadOrStore(k, storetest.Plan(scope, limits...))
	return p.(*engine.Plan)
}

// Take is Apply of a Take, with the Result in brief: on two stores that
// share a clock, the same Takes give the same numbers, for plans of one
// limit (whose Brief is all of the Result) and of several (the combined
// numbers), denials, invalid costs and a closed store included.
func TestTakeIsApplyInBrief(t *testing.T) {
	ctx := context.Background()
	for _, alg := range core.Algorithms() {
		one := core.PerSecond(5).WithAlgorithm(alg)
		if alg.HasBurst() {
			one = one.WithBurst(3)
		}
		if alg == core.Concurrency {
			one = core.InFlight(5, time.Second)
		}
		for _, limits := range [][]core.Limit{{one}, {one, core.PerMinute(40).Named("minute"), core.PerHour(100).Named("hour")}} {
			t.Run(fmt.Sprintf("%s, %d limits", alg, len(limits)), func(t *testing.T) {
				clock := &manualClock{t: epoch}
				brief, full := New(WithClock(clock), WithSweepInterval(0)), New(WithClock(clock), WithSweepInterval(0))
				plan := planOf("", limits...)
				costs := []int64{1, 1, 2, 0, 4, 1, 9, -1, 1, 3}
				check := func(step int, key string, cost int64) {
					t.Helper()
					got, err1 := brief.Take(ctx, plan, key, cost)
					res, err2 := full.Apply(ctx, engine.Op{Plan: plan, Key: key, Kind: engine.Take, Cost: cost})
					want := engine.Brief{Allowed: res.Allowed, Remaining: res.Remaining, Reset: res.Reset,
						Wait: res.Retry, Window: res.Window, Lease: res.Lease, At: res.At}
					if res.Allowed {
						want.Wait = res.Delay
					}
					if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() || err1 == nil && got != want {
						t.Fatalf("step %d: Take(%q, %d) = %+v, %v; Apply's Result in brief is %+v, %v", step, key, cost, got, err1, want, err2)
					}
				}
				for i := range 300 {
					clock.t = epoch.Add(time.Duration(i*i%997) * 7 * time.Millisecond)
					check(i, []string{"a", "b"}[i%2], costs[i%len(costs)])
				}
				brief.Close()
				full.Close()
				check(-1, "a", 1)
			})
		}
	}
}

// A decision of one limit on an existing key reads one cache line of its
// entry (the lookup before it, one more: the key's): the plan, expiry,
// flags and the state's registers lie in the entry's first 64 bytes, and
// entries, with their keys' bytes, are allocated 64-byte aligned, whatever
// the key's length.
func TestEntryHotFieldsShareALine(t *testing.T) {
	var e entry
	st := unsafe.Offsetof(e.one) // one[0]
	if end := st + unsafe.Offsetof(e.one[0].C) + unsafe.Sizeof(e.one[0].C); end > 64 {
		t.Errorf("one[0].C ends at byte %d of an entry, past its first cache line", end)
	}
	for name, off := range map[string]uintptr{"plan": unsafe.Offsetof(e.plan), "expires": unsafe.Offsetof(e.expires), "hashed": unsafe.Offsetof(e.hashed), "solo": unsafe.Offsetof(e.solo)} {
		if off >= 64 {
			t.Errorf("entry.%s is at byte %d, past the first cache line", name, off)
		}
	}
	for _, n := range []int{0, 1, 15, 16, 17, 32, 80, 81, 256} {
		key := strings.Repeat("k", n)
		var kept []*entry // live, so that each is a new object
		for range 50 {
			e := newEntry(key)
			if p := uintptr(unsafe.Pointer(e)); p%64 != 0 {
				t.Fatalf("an entry of a %d-byte key is at %#x, not 64-byte aligned", n, p)
			}
			if e.key != key {
				t.Fatalf("newEntry(%d bytes).key = %q", n, e.key)
			}
			kept = append(kept, e)
		}
		runtime.KeepAlive(kept)
	}
}

// An entry's key is its own copy: a caller's buffer reused afterwards (as
// fasthttp reuses a request's) does not change it.
func TestEntryKeyIsACopy(t *testing.T) {
	for _, n := range []int{3, 16, 40, 80, 300} {
		buf := []byte(strings.Repeat("a", n))
		e := newEntry(unsafe.String(&buf[0], n))
		for i := range buf {
			buf[i] = 'b'
		}
		if e.key != strings.Repeat("a", n) {
			t.Errorf("a %d-byte key changed with the caller's buffer: %q", n, e.key)
		}
	}
}

// countingClock is a clock that stands still and counts its reads.
type countingClock struct{ reads int }

func (c *countingClock) Now() time.Time { c.reads++; return epoch }

// A Take through TakeBrief, a Limiter's path, reads the clock once, for a
// key that exists and for one it creates (where TakeBrief hands the time it
// read to applyLocked), and answers a plan it cannot decide with apply's error.
func TestTakeBriefReadsTheClockOnce(t *testing.T) {
	c := &countingClock{}
	s := New(WithSweepInterval(0), WithClock(c))
	defer s.Close()
	plan := planOf("", core.PerSecond(10))
	for i, key := range []string{"new", "new", "other"} {
		c.reads = 0
		if _, err := s.Take(context.Background(), plan, key, 1); err != nil {
			t.Fatalf("Take %d (%q): %v", i, key, err)
		}
		if c.reads != 1 {
			t.Errorf("Take %d (%q) read the clock %d times, want 1", i, key, c.reads)
		}
	}
	if _, err := s.Take(context.Background(), nil, "k", 1); !errors.Is(err, engine.ErrInvalidOp) {
		t.Errorf("Take(nil plan) error = %v, want ErrInvalidOp", err)
	}
}
