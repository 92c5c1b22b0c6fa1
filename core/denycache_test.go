package core_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
)

// remoteStore is a memstore that looks remote (not InProcess), counting
// the calls that reach it and failing them while down is set.
type remoteStore struct {
	s     *memstore.Store
	calls atomic.Int64
	down  atomic.Bool
	gate  atomic.Pointer[chan struct{}] // when set, Apply waits for it to close
}

func newRemoteStore(t *testing.T) *remoteStore {
	s := memstore.New(memstore.WithSweepInterval(0))
	t.Cleanup(func() { s.Close() })
	return &remoteStore{s: s}
}

func (r *remoteStore) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	r.calls.Add(1)
	if g := r.gate.Load(); g != nil {
		<-*g
	}
	if r.down.Load() {
		return engine.Result{}, errDown
	}
	return r.s.Apply(ctx, op)
}

func (r *remoteStore) Close() error { return nil }

// The deny cache answers a denied key's further requests itself, with the
// store's Decision less the time since, until RetryAfter; then the store is
// asked again. Every Decision equals the one a Limiter without the cache
// makes on its own store.
func TestDenyCacheAnswersLikeTheStore(t *testing.T) {
	clock := newManualClock(t0.Add(123 * time.Millisecond))
	remote := newRemoteStore(t)
	limits := []core.Option{core.PerSecond(5).WithAlgorithm(core.GCRA), core.PerMinute(30), core.WithClock(clock)}
	cached, err := core.New(remote, append(limits, core.WithDenyCache(core.DenyCache{MaxAge: time.Minute}))...)
	if err != nil {
		t.Fatal(err)
	}
	plain := newLimiter(t, clock, append(limits[:2:2], core.WithBreaker(core.Breaker{Disabled: true}))...)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	hits := 0
	for i := range 3000 {
		clock.Set(clock.Now().Add(time.Duration(r.IntN(40)) * time.Millisecond))
		cost := int64(1 + r.IntN(2))
		before := remote.calls.Load()
		got, err := cached.AllowN(ctx, "k", cost)
		if err != nil {
			t.Fatal(err)
		}
		want, err := plain.AllowN(ctx, "k", cost)
		if err != nil {
			t.Fatal(err)
		}
		fromCache := remote.calls.Load() == before
		if fromCache {
			hits++
			if got.Source != core.FromDenyCache {
				t.Fatalf("step %d: no store call, but Source %v", i, got.Source)
			}
			got.Source = core.FromStore
			// Remaining is the store's at the denial: time may have
			// refilled some since, never taken any.
			if got.Remaining > want.Remaining {
				t.Fatalf("step %d: remembered Remaining %d, more than the store's %d", i, got.Remaining, want.Remaining)
			}
			got.Remaining = want.Remaining
			for j := range got.States {
				if got.States[j].Remaining > want.States[j].Remaining {
					t.Fatalf("step %d: limit %d: remembered Remaining %d, more than the store's %d", i, j, got.States[j].Remaining, want.States[j].Remaining)
				}
				got.States[j].Remaining = want.States[j].Remaining
			}
		}
		if resultOf(got) != resultOf(want) || got.Limit != want.Limit || len(got.States) != len(want.States) {
			t.Fatalf("step %d (from cache %t): %v by %v, want %v by %v", i, fromCache, resultOf(got), got.Limit, resultOf(want), want.Limit)
		}
		for j := range got.States {
			if stateResult(got.States[j]) != stateResult(want.States[j]) {
				t.Fatalf("step %d: limit %d: %v, want %v", i, j, stateResult(got.States[j]), stateResult(want.States[j]))
			}
		}
	}
	if hits < 1000 {
		t.Fatalf("%d of 3000 decisions came from the cache: the trace does not exercise it", hits)
	}
}

// A denial is remembered for min(RetryAfter, MaxAge) at most, only for
// the cost denied, and forgotten by this Limiter's Refund, Reset and
// Release. Another Limiter's reset goes unseen for at most MaxAge, and
// then the cache only denies what the store would admit.
func TestDenyCacheBounds(t *testing.T) {
	clock := newManualClock(t0)
	remote := newRemoteStore(t)
	newLim := func(opts ...core.Option) *core.Limiter {
		lim, err := core.New(remote, append([]core.Option{core.PerHour(2), core.WithClock(clock)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return lim
	}
	lim := newLim(core.WithDenyCache(core.DenyCache{MaxAge: 2 * time.Second}))
	other := newLim()
	ctx := context.Background()
	allow := func(l *core.Limiter, cost int64) core.Decision {
		t.Helper()
		d, err := l.AllowN(ctx, "k", cost)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	calls := func(f func()) int64 {
		before := remote.calls.Load()
		f()
		return remote.calls.Load() - before
	}
	allow(lim, 2)
	if n := calls(func() { allow(lim, 1) }); n != 1 {
		t.Fatalf("the first denial made %d store calls, want 1", n)
	}
	if n := calls(func() {
		for range 100 {
			if d := allow(lim, 1); d.Allowed || d.Source != core.FromDenyCache {
				t.Fatalf("a remembered denial: %+v", d)
			}
		}
	}); n != 0 {
		t.Fatalf("100 denials of a remembered key made %d store calls, want 0", n)
	}
	if n := calls(func() { allow(lim, 2) }); n != 1 {
		t.Fatalf("another cost made %d store calls, want 1: a denial is remembered for its cost", n)
	}
	// MaxAge bounds a denial of an hour.
	clock.Set(t0.Add(2 * time.Second))
	if n := calls(func() { allow(lim, 1) }); n != 1 {
		t.Fatalf("after MaxAge: %d store calls, want 1", n)
	}
	// Another Limiter's Reset is unseen until MaxAge passes; the cache
	// then denies what the store admits, never the opposite.
	if _, err := other.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d := allow(lim, 1); d.Allowed || d.Source != core.FromDenyCache {
		t.Fatalf("right after another Limiter's reset: %+v, want the remembered denial", d)
	}
	clock.Set(t0.Add(4 * time.Second))
	if d := allow(lim, 1); !d.Allowed || d.Source != core.FromStore {
		t.Fatalf("MaxAge after another Limiter's reset: %+v, want allowed by the store", d)
	}
	// This Limiter's own Refund, Reset and Release forget the key at once.
	for _, forget := range []func() error{
		func() error { _, err := lim.Refund(ctx, "k", 1); return err },
		func() error { _, err := lim.Reset(ctx, "k"); return err },
	} {
		if _, err := lim.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		allow(lim, 2)
		if d := allow(lim, 1); d.Allowed {
			t.Fatalf("over the limit: %+v", d)
		}
		if err := forget(); err != nil {
			t.Fatal(err)
		}
		if d := allow(lim, 1); !d.Allowed {
			t.Fatalf("after this Limiter's own refund or reset: %+v, want allowed", d)
		}
	}
}

// Denials by a Concurrency limit, and decisions of the failure policy, are
// not remembered.
func TestDenyCacheSkips(t *testing.T) {
	remote := newRemoteStore(t)
	ctx := context.Background()
	lim, err := core.New(remote, core.InFlight(1, time.Hour), core.WithDenyCache(core.DenyCache{}),
		core.WithBreaker(core.Breaker{Disabled: true}))
	if err != nil {
		t.Fatal(err)
	}
	held, err := lim.Allow(ctx, "k")
	if err != nil || !held.Allowed {
		t.Fatalf("first acquisition: %+v, %v", held, err)
	}
	if d, _ := lim.Allow(ctx, "k"); d.Allowed || d.Source != core.FromStore {
		t.Fatalf("second acquisition: %+v, want denied by the store", d)
	}
	if d, _ := lim.Allow(ctx, "k"); d.Source != core.FromStore {
		t.Fatalf("a concurrency denial was remembered: %+v", d)
	}
	remote.down.Store(true)
	if _, err := lim.Allow(ctx, "j"); err == nil {
		t.Fatal("FailClosed with the store down: no error")
	}
	remote.down.Store(false)
	if d, err := lim.Allow(ctx, "j"); err != nil || !d.Allowed {
		t.Fatalf("after the outage: %+v, %v; a failure was remembered", d, err)
	}
}

// However many keys a flood denies, the cache holds at most Size of them.
func TestDenyCacheIsBounded(t *testing.T) {
	// 100 keys a shard: a full shard drops a random entry for a new one,
	// so a recent key is lost with odds of about 1 in 100 per later key of
	// its shard, and an old one is all but surely gone after 20,000.
	const size, keys = 1600, 20_000
	remote := newRemoteStore(t)
	lim, err := core.New(remote, core.PerHour(1), core.WithDenyCache(core.DenyCache{Size: size}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range keys {
		k := strconv.Itoa(i)
		lim.Allow(ctx, k)
		if d, _ := lim.Allow(ctx, k); d.Allowed {
			t.Fatalf("key %s allowed twice in an hour", k)
		}
	}
	// The most recent denials are remembered; most older ones are not.
	before := remote.calls.Load()
	for i := keys - 10; i < keys; i++ {
		lim.Allow(ctx, strconv.Itoa(i))
	}
	recent := remote.calls.Load() - before
	before = remote.calls.Load()
	for i := range 1000 {
		lim.Allow(ctx, strconv.Itoa(i))
	}
	old := remote.calls.Load() - before
	if recent > 2 || old < 900 {
		t.Fatalf("store calls for 10 recent keys %d (want about 0), for 1000 old keys %d (want about 1000)", recent, old)
	}
	if n := core.DenyCacheLen(lim); n > size {
		t.Fatalf("the cache holds %d keys, more than its Size of %d", n, size)
	}
}

func TestDenyCacheRejectsBadConfiguration(t *testing.T) {
	for _, c := range []core.DenyCache{{Size: -1}, {MaxAge: -time.Second}} {
		if _, err := core.New(memstore.New(), core.PerSecond(1), core.WithDenyCache(c)); !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("WithDenyCache(%+v): err %v, want ErrInvalidOption", c, err)
		}
	}
}

// When a remembered denial runs out, one caller asks the store; the key's
// other callers are answered with the denial until its answer comes.
func TestDenyCacheOneCallerAsks(t *testing.T) {
	clock := newManualClock(t0)
	remote := newRemoteStore(t)
	lim, err := core.New(remote, core.PerSecond(1).WithAlgorithm(core.GCRA), core.WithClock(clock), core.WithDenyCache(core.DenyCache{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lim.Allow(ctx, "k")
	if d, _ := lim.Allow(ctx, "k"); d.Allowed || d.Source != core.FromStore || d.RetryAfter != time.Second {
		t.Fatalf("second request: %+v, want denied by the store for 1s", d)
	}
	clock.Set(t0.Add(time.Second))
	gate := make(chan struct{})
	remote.gate.Store(&gate)
	asked := make(chan core.Decision)
	go func() {
		d, _ := lim.Allow(ctx, "k")
		asked <- d
	}()
	for remote.calls.Load() != 3 { // the asking caller is in the store
		time.Sleep(time.Millisecond)
	}
	for range 10 {
		d, err := lim.Allow(ctx, "k")
		if err != nil || d.Allowed || d.Source != core.FromDenyCache || d.RetryAfter != time.Millisecond {
			t.Fatalf("while another caller asks: %+v, %v; want the remembered denial, retry in 1ms", d, err)
		}
	}
	if n := remote.calls.Load(); n != 3 {
		t.Fatalf("%d store calls, want 3: one caller asks", n)
	}
	remote.gate.Store(nil)
	close(gate)
	if d := <-asked; !d.Allowed || d.Source != core.FromStore {
		t.Fatalf("the asking caller: %+v, want admitted by the store", d)
	}
	if d, _ := lim.Allow(ctx, "k"); d.Allowed || d.Source != core.FromStore {
		t.Fatalf("the next caller: %+v, want denied by the store", d)
	}
	if d, _ := lim.Allow(ctx, "k"); d.Source != core.FromDenyCache {
		t.Fatalf("then: %+v, want the remembered denial", d)
	}
}
