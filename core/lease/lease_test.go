package lease_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/lease"
	"github.com/tollgate/tollgate/core/lease/leasetest"
)

func TestNewRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  lease.Option
	}{
		{"a zero max lease", lease.WithMaxLease(0)},
		{"a negative renew interval", lease.WithRenewInterval(-time.Second)},
		{"a share of 0", lease.WithShare(0)},
		{"a share above 1", lease.WithShare(1.5)},
		{"a NaN share", lease.WithShare(math.NaN())},
		{"a zero min lease", lease.WithMinLease(0)},
		{"no keys", lease.WithMaxKeys(0)},
		{"a zero timeout", lease.WithTimeout(0)},
		{"a nil clock", lease.WithClock(nil)},
		{"a nil option", nil},
		{"a min lease above the max lease", lease.WithMinLease(2 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := lease.New(newShared(t), tt.opt); !errors.Is(err, core.ErrInvalidOption) {
				t.Errorf("New(%s) error = %v, want one wrapping core.ErrInvalidOption", tt.name, err)
			}
		})
	}
	if _, err := lease.New(nil); !errors.Is(err, core.ErrInvalidOption) {
		t.Errorf("New(nil) error = %v, want one wrapping core.ErrInvalidOption", err)
	}
}

// A single instance: below its quota, most decisions are local; asking
// twice its quota, every admission fits the exact single store and the
// quota is used.
func TestOneInstanceDecidesLocallyWithinTheQuota(t *testing.T) {
	for _, alg := range leasable {
		t.Run(alg.String(), func(t *testing.T) {
			for _, tt := range []struct {
				name  string
				quota int64 // per second; Takes come at 2000/s
				local float64
			}{{"below the quota", 20_000, 0.9}, {"at twice the quota", 1000, 0}} {
				plan := planOf(leasetest.LimitOf(alg, tt.quota, time.Second))
				st := newLease(t, newShared(t))
				or := leasetest.NewOracle(plan)
				var admitted int64
				const n = 8000 // 4 s at 2000/s
				for i := range int64(n) {
					now := t0 + 123 + i*500
					if res := take(t, st, plan, "k", 1, now); res.Allowed {
						admitted++
						if !or.Admit(1, now) {
							t.Fatalf("%s: Take #%d at +%dµs admitted; the exact single store denies it", tt.name, i, now-t0)
						}
					}
				}
				s := st.Stats()
				if float64(s.Local) < tt.local*n {
					t.Errorf("%s: %d of %d Takes decided locally, want at least %.0f%% (stats %+v)", tt.name, s.Local, n, 100*tt.local, s)
				}
				// 4 s of the quota (a token bucket starts full: 1 s more).
				if want := min(n, 4*tt.quota) * 9 / 10; admitted < want {
					t.Errorf("%s: admitted %d, want at least %d (stats %+v)", tt.name, admitted, want, s)
				}
			}
		})
	}
}

// Remaining, for a lone instance, is the truth: the shared remaining at
// the reservation plus the units held.
func TestRemainingCountsTheUnitsHeld(t *testing.T) {
	plan := planOf(core.PerMinute(1000).WithAlgorithm(core.FixedWindow))
	st := newLease(t, newShared(t))
	for i := int64(1); i <= 300; i++ {
		res := take(t, st, plan, "k", 1, t0+i*ms)
		if !res.Allowed || res.Remaining != 1000-i {
			t.Fatalf("Take #%d = allowed %v, remaining %d; want true, %d", i, res.Allowed, res.Remaining, 1000-i)
		}
	}
	if s := st.Stats(); s.Local < 250 {
		t.Errorf("Stats().Local = %d of 300 Takes, want most", s.Local)
	}
}

// A refused reservation is remembered: Takes are denied in process until
// the shared store's Retry, with its numbers.
func TestARefusedReservationIsADenialUntilRetry(t *testing.T) {
	plan := planOf(core.PerSecond(10).WithAlgorithm(core.FixedWindow))
	shared := newShared(t)
	st := newLease(t, shared)
	// Another instance spends the quota.
	if _, err := shared.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Cost: 10, Now: t0}); err != nil {
		t.Fatal(err)
	}
	res := take(t, st, plan, "k", 1, t0+100*ms)
	if res.Allowed || res.Retry != 900*ms {
		t.Fatalf("Take on a spent quota = %+v, want denied with Retry 900ms", res)
	}
	before := st.Stats().Reservations
	for i := int64(1); i < 9; i++ {
		res := take(t, st, plan, "k", 1, t0+100*ms+i*100*ms)
		if res.Allowed || res.Retry != 900*ms-i*100*ms {
			t.Fatalf("Take %dms later = %+v, want denied with Retry %dms", i*100, res, 900-i*100)
		}
	}
	if got := st.Stats().Reservations; got != before {
		t.Errorf("denied Takes before Retry made %d reservations, want 0", got-before)
	}
	if res := take(t, st, plan, "k", 1, t0+time.Second.Microseconds()); !res.Allowed {
		t.Errorf("Take at Retry = %+v, want allowed in the new window", res)
	}
}

// Plans with a limit that cannot lease go to the shared store whole, and
// get its exact answers.
func TestPlansThatCannotLeasePassThrough(t *testing.T) {
	plans := map[string]*engine.Plan{
		"sliding-log":  planOf(core.PerSecond(5).WithAlgorithm(core.SlidingLog)),
		"leaky-bucket": planOf(core.PerSecond(5).WithAlgorithm(core.LeakyBucket)),
		"concurrency":  planOf(core.Limit{Quota: 3, Period: time.Minute, Algorithm: core.Concurrency}),
		"a fixed window beside a sliding log": planOf(core.PerSecond(5).WithAlgorithm(core.FixedWindow),
			core.PerMinute(20).WithAlgorithm(core.SlidingLog)),
	}
	for name, plan := range plans {
		t.Run(name, func(t *testing.T) {
			st := newLease(t, newShared(t))
			states := make([]engine.State, len(plan.Limits))
			for i := range int64(12) {
				op := engine.Op{Plan: plan, Key: "k", Cost: 1, Now: t0 + i*50*ms}
				var want engine.Result
				if _, err := engine.Step(&op, op.Now, states, &want); err != nil {
					t.Fatal(err)
				}
				got, err := st.Apply(context.Background(), op)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("Take #%d = %+v, %v; want %+v", i, got, err, want)
				}
			}
			if s := st.Stats(); s.Passed != 12 || s.Local != 0 {
				t.Errorf("Stats() = %+v, want 12 passed, none local", s)
			}
		})
	}
}

// Reset drops the allowance: the key is fresh, and the units held before
// it are never spent.
func TestResetDropsTheAllowance(t *testing.T) {
	plan := planOf(core.PerMinute(100).WithAlgorithm(core.FixedWindow))
	st := newLease(t, newShared(t))
	for i := int64(1); i <= 50; i++ {
		take(t, st, plan, "k", 1, t0+i*ms)
	}
	if _, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Reset, Now: t0 + 60*ms}); err != nil {
		t.Fatal(err)
	}
	or := leasetest.NewOracle(plan)
	admitted := 0
	for i := int64(0); i < 200; i++ {
		now := t0 + 61*ms + i*ms
		if take(t, st, plan, "k", 1, now).Allowed {
			admitted++
			if !or.Admit(1, now) {
				t.Fatalf("Take #%d after Reset admitted beyond a fresh quota", i)
			}
		}
	}
	if admitted < 90 {
		t.Errorf("admitted %d after Reset, want about the fresh quota of 100", admitted)
	}
}

// Peek, Charge and Refund pass through; their Results count the units
// held as remaining.
func TestOtherOperationsPassThrough(t *testing.T) {
	plan := planOf(core.PerMinute(100).WithAlgorithm(core.FixedWindow))
	st := newLease(t, newShared(t))
	for i := int64(1); i <= 20; i++ {
		take(t, st, plan, "k", 1, t0+i*ms)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		kind engine.Kind
		cost int64
		want int64
	}{{engine.Peek, 0, 80}, {engine.Charge, 10, 70}, {engine.Refund, 5, 75}} {
		res, err := st.Apply(ctx, engine.Op{Plan: plan, Key: "k", Kind: tt.kind, Cost: tt.cost, Now: t0 + 30*ms})
		if err != nil || res.Remaining != tt.want {
			t.Errorf("%s(%d) = %+v, %v; want remaining %d", tt.kind, tt.cost, res, err, tt.want)
		}
	}
}

// failing is a shared store that fails every call once told to.
type failing struct {
	core.Store
	fail atomic.Bool
}

var errDown = errors.New("shared store down")

func (f *failing) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	if f.fail.Load() {
		return engine.Result{}, errDown
	}
	return f.Store.Apply(ctx, op)
}

// While the shared store fails, an instance spends what it holds, then
// returns the store's error (for the Limiter's failure policy).
func TestAFailingStoreLeavesOnlyWhatIsHeld(t *testing.T) {
	plan := planOf(core.PerMinute(10_000).WithAlgorithm(core.SlidingWindow))
	f := &failing{Store: newShared(t)}
	st := newLease(t, f)
	now := t0
	for range 100 {
		now += 100
		take(t, st, plan, "k", 1, now)
	}
	f.fail.Store(true)
	local := 0
	for {
		now += 100
		res, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Cost: 1, Now: now})
		lease.Wait(st)
		if err != nil {
			if !errors.Is(err, errDown) {
				t.Fatalf("error = %v, want the store's", err)
			}
			break
		}
		if !res.Allowed {
			t.Fatalf("Take while the store is down = %+v, want allowed from the allowance or an error", res)
		}
		if local++; local > 10_000 {
			t.Fatal("the store is down and the instance admits without end")
		}
	}
	if local == 0 {
		t.Errorf("the instance admitted nothing from its allowance once the store failed")
	}
}

// A key flood keeps the allowances bounded, and an evicted allowance's
// units go back to the shared store.
func TestMaxKeysBoundsTheAllowancesAndGivesUnitsBack(t *testing.T) {
	plan := planOf(core.PerMinute(1000).WithAlgorithm(core.FixedWindow))
	shared := newShared(t)
	st := newLease(t, shared, lease.WithMaxKeys(4))
	now := t0
	for k := range 50 {
		key := fmt.Sprint("key-", k)
		for range 20 {
			now += 100
			take(t, st, plan, key, 1, now)
		}
		if st.Len() > 4 {
			t.Fatalf("Len() = %d after %d keys, want at most 4", st.Len(), k+1)
		}
	}
	// Every key but the 4 kept shows exactly its 20 units spent: nothing
	// stranded, nothing invented.
	for k := range 46 {
		res, err := shared.Apply(context.Background(), engine.Op{Plan: plan, Key: fmt.Sprint("key-", k), Kind: engine.Peek, Now: now})
		if err != nil || res.Remaining != 980 {
			t.Errorf("shared Peek(key-%d) = %+v, %v; want 980 remaining", k, res, err)
		}
	}
}

// Under TokenBucket and GCRA, a key flood past WithMaxKeys evicts
// allowances that hold units, which expire, never given back: the
// allowances stay within the bound, every admission passes its key's exact
// store, and each key's shared bucket shows exactly what it was charged,
// its admissions and, once, the units its allowance let expire (or burned).
// Units are neither kept past the eviction nor invented.
func TestMaxKeysLetsATokenBucketsUnitsExpire(t *testing.T) {
	for _, l := range []core.Limit{
		core.PerMinute(1000).WithAlgorithm(core.TokenBucket),
		core.PerMinute(1000).WithAlgorithm(core.GCRA).WithBurst(500),
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			plan := planOf(l)
			shared := newShared(t)
			st := newLease(t, shared, lease.WithMaxKeys(4))
			oracles := map[string]*leasetest.Oracle{}
			now := t0
			for k := range 50 {
				key := fmt.Sprint("key-", k)
				or := leasetest.NewOracle(plan)
				oracles[key] = or
				for range 20 {
					now += 100
					if take(t, st, plan, key, 1, now).Allowed && !or.Admit(1, now) {
						t.Fatalf("%s admitted at +%dµs; its exact single store denies it", key, now-t0)
					}
				}
				if st.Len() > 4 {
					t.Fatalf("Len() = %d after %d keys, want at most 4", st.Len(), k+1)
				}
			}
			s := st.Stats()
			if s.GiveBacks != 0 || s.Returned != 0 {
				t.Fatalf("Stats = %+v: units given back; a token bucket's units expire", s)
			}
			evicted := s.Expired
			if evicted == 0 {
				t.Fatal("no units expired: no allowance held units when evicted, and the test checked nothing")
			}
			st.Flush() // the 4 keys kept: their units expire too
			if s = st.Stats(); s.GiveBacks != 0 || s.Returned != 0 {
				t.Errorf("Stats after Flush = %+v: units given back; a token bucket's units expire", s)
			}
			// Over these 100ms the buckets refill a unit or two and are
			// never full again: each shared bucket is below its exact
			// store by exactly the units charged and never spent.
			var short int64
			for key, or := range oracles {
				res, err := shared.Apply(context.Background(), engine.Op{Plan: plan, Key: key, Kind: engine.Peek, Now: now})
				if err != nil {
					t.Fatal(err)
				}
				want := or.Remaining(now)
				if res.Remaining > want {
					t.Errorf("shared Peek(%s) = %d remaining, the exact store %d: units invented", key, res.Remaining, want)
				}
				short += want - res.Remaining
			}
			if short != s.Expired+s.Burned {
				t.Errorf("the shared buckets show %d units fewer than the exact stores; %d expired (%d of them at eviction) and %d burned: want them equal", short, s.Expired, evicted, s.Burned)
			}
			t.Logf("%d units expired at eviction, %d at the Flush, %d burned", evicted, s.Expired-evicted, s.Burned)
		})
	}
}

// Close gives the unspent units back.
func TestCloseGivesUnitsBack(t *testing.T) {
	plan := planOf(core.PerMinute(1000).WithAlgorithm(core.SlidingWindow))
	shared := newShared(t)
	st := newLease(t, shared)
	for i := int64(1); i <= 100; i++ {
		take(t, st, plan, "k", 1, t0+i*100)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := shared.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Peek, Now: t0 + 20*ms})
	if err != nil || res.Remaining != 900 {
		t.Errorf("shared Peek after Close = %+v, %v; want 900 remaining", res, err)
	}
	if _, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Cost: 1}); !errors.Is(err, core.ErrClosed) {
		t.Errorf("Take after Close: error %v, want one wrapping core.ErrClosed", err)
	}
}

// slow delays every call of a shared store and counts the Takes.
type slow struct {
	core.Store
	takes atomic.Int64
}

func (s *slow) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	if op.Kind == engine.Take {
		s.takes.Add(1)
	}
	time.Sleep(5 * time.Millisecond)
	return s.Store.Apply(ctx, op)
}

// 64 callers arriving on a cold key wait for one reservation rather than
// making one each.
func TestCallersOfAColdKeyShareAReservation(t *testing.T) {
	plan := planOf(core.PerMinute(10_000).WithAlgorithm(core.FixedWindow))
	sh := &slow{Store: newShared(t)}
	st := newLease(t, sh)
	var wg sync.WaitGroup
	var admitted atomic.Int64
	start := make(chan struct{})
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Cost: 1, Now: t0})
			if err == nil && res.Allowed {
				admitted.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	lease.Wait(st)
	if admitted.Load() != 64 {
		t.Errorf("admitted %d of 64", admitted.Load())
	}
	// Four reservations is usual (the first caller's own Take, the first
	// slice, and renewals sized to the burst); a loaded machine that starts
	// the callers a round trip apart adds one or two. Without sharing it
	// would be 64.
	if n := sh.takes.Load(); n > 8 {
		t.Errorf("64 callers on a cold key made %d reservations, want a few", n)
	}
}

// A Reset made through another instance is not seen by this one's slices
// until their leases end: after it, the key admits at most a fresh quota
// plus the units the other instances held (the documented bound), and
// Flush, as a rule reload would, gives those back.
func TestAResetElsewhereIsBoundedByTheSlicesHeld(t *testing.T) {
	plan := planOf(core.PerMinute(100).WithAlgorithm(core.FixedWindow))
	shared := newShared(t)
	a, b := newLease(t, shared, lease.WithMinSlice(20)), newLease(t, shared)
	now := t0
	for range 10 {
		now += ms
		take(t, a, plan, "k", 1, now)
	}
	held := int64(0)
	if res, err := shared.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Peek, Now: now}); err == nil {
		held = 100 - res.Remaining - 10 // reserved by a, not spent
	}
	if held <= 0 {
		t.Fatalf("instance a holds %d units, want a slice", held)
	}
	if _, err := b.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Reset, Now: now}); err != nil {
		t.Fatal(err)
	}
	admitted := int64(0)
	for range 300 {
		now += 100
		for _, st := range []*lease.Store{a, b} {
			if take(t, st, plan, "k", 1, now).Allowed {
				admitted++
			}
		}
	}
	if admitted > 100+held {
		t.Errorf("after a Reset through b, a and b admitted %d in the window, want at most 100 + the %d units a held", admitted, held)
	}
	if admitted < 100 {
		t.Errorf("after a Reset, a and b admitted %d, want the fresh quota of 100", admitted)
	}
	t.Logf("a held %d at the Reset; a and b admitted %d after it", held, admitted)
	// A rule reload: a's slices go back, and the shared state shows them.
	before, _ := shared.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Peek, Now: now})
	a.Flush()
	b.Flush()
	after, _ := shared.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Peek, Now: now})
	if after.Remaining < before.Remaining {
		t.Errorf("Flush: shared remaining %d before, %d after; want the units back", before.Remaining, after.Remaining)
	}
}

// Keys asked about less often than once per renew interval get no
// allowance: their Takes go to the shared store, as without leases, with
// nothing held for them. A key asked about twice within the interval gets
// one and turns local; a denied cold key is remembered as denied.
func TestOnlyKeysAskedAboutAgainGetAnAllowance(t *testing.T) {
	plan := planOf(core.PerMinute(1000).WithAlgorithm(core.GCRA))
	shared := newShared(t)
	st := newLease(t, shared)
	now := t0
	for range 3 {
		for k := range 1000 {
			if res := take(t, st, plan, fmt.Sprint("cold-", k), 1, now+int64(k)*50); !res.Allowed {
				t.Fatalf("cold Take denied: %+v", res)
			}
		}
		now += 100 * ms
	}
	if s := st.Stats(); st.Len() != 0 || s.Reservations != 3000 || s.Local != 0 {
		t.Fatalf("after 3 rounds over 1000 cold keys: Len() = %d, %+v; want 0 allowances, 3000 reservations, none local", st.Len(), s)
	}
	for i := range int64(200) {
		take(t, st, plan, "hot", 1, now+i*100)
	}
	if s := st.Stats(); st.Len() != 1 || s.Local < 150 {
		t.Errorf("200 Takes of a hot key: Len() = %d, %d decided locally; want 1 allowance, most local", st.Len(), s.Local)
	}
	// Another instance spends a key's quota: this one's cold Take is
	// denied by the shared store, and the denial is remembered.
	fixed := planOf(core.PerMinute(1000).WithAlgorithm(core.FixedWindow))
	if _, err := shared.Apply(context.Background(), engine.Op{Plan: fixed, Key: "spent", Cost: 1000, Now: now}); err != nil {
		t.Fatal(err)
	}
	before := st.Stats().Reservations
	for i := range int64(5) {
		if res := take(t, st, fixed, "spent", 1, now+i*30*ms); res.Allowed {
			t.Fatalf("Take of a spent key allowed: %+v", res)
		}
	}
	if got := st.Stats().Reservations - before; got != 1 {
		t.Errorf("5 Takes of a spent key, 30ms apart, made %d reservations; want 1, the rest denied locally", got)
	}
}

// With WithMinSlice, every key gets an allowance at its first request, as
// that option promises, however rarely it is asked about: its second
// request reserves a slice, and its third is decided in process.
func TestMinSliceGivesEveryKeyAnAllowance(t *testing.T) {
	plan := planOf(core.PerMinute(1000).WithAlgorithm(core.FixedWindow))
	st := newLease(t, newShared(t), lease.WithMinSlice(10))
	take(t, st, plan, "rare", 1, t0)
	if st.Len() != 1 {
		t.Fatalf("Len() = %d after a key's first request with WithMinSlice, want 1", st.Len())
	}
	take(t, st, plan, "rare", 1, t0+100*ms)
	before := st.Stats().Local
	if res := take(t, st, plan, "rare", 1, t0+200*ms); !res.Allowed || st.Stats().Local != before+1 {
		t.Errorf("third request 100ms apart: %+v, %d decided locally; want allowed in process", res, st.Stats().Local-before)
	}
}
