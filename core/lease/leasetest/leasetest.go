// Package leasetest is the fleet simulator of package lease: fleets of
// lease.Stores share one store on a virtual clock, and every admission,
// replayed at its instant on one exact single store (engine.Step), must be
// admitted there too. Package lease runs it on a memstore, the Redis store
// on a real Redis; a store meant to be a lease's shared store can too:
//
//	func TestLeaseSimulator(t *testing.T) {
//		leasetest.Run(t, func(t *testing.T) core.Store { return mystore.New(...) })
//	}
//
// The shared store must honour an engine.Op's Now (the virtual clock). Each
// fleet gets a store of its own from the Factory, or at least keys no other
// fleet uses (a fresh prefix), and the simulator closes it.
//
// Two runs, on every algorithm that leases:
//
//   - Fleets of 2 to 6 instances of random demand (½× to 4× the limit)
//     on one key: some instances crash (dropped with their slices, never
//     given back), some end their leases early (Flush), the key is Reset
//     fleet-wide now and then. Every other fleet is bursty: spikes of up
//     to twice the capacity at one instant, some after a pause that ends
//     shortly before the shared store would be full again (where a token
//     bucket's leases must have ended). Each fleet must also admit at
//     least 90% (bursty: 85%) of what the same requests, decided one by
//     one on the exact store, admit.
//   - A key flood: instances that keep allowances for a few keys only
//     (lease.WithMaxKeys) serve many keys, evicting allowances that hold
//     units. Allowances stay within the bound, and afterwards (every
//     instance flushed) the shared store shows, for every key, no more
//     room than the exact store, and less by at most the units the fleet
//     counted as expired or burned (Stats): an evicted allowance's units
//     are given back or expire, never kept, never invented. Under
//     TokenBucket and GCRA they are never given back.
//
// A fleet's trace depends on its seed only: the simulator waits for each
// instance's background work before the next request, so that a failure
// replays, on any store that decides as engine.Step does.
package leasetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/lease"
	"github.com/tollgate/tollgate/core/lease/internal/hook"
	"github.com/tollgate/tollgate/core/storetest"
)

// Factory returns a new shared store for one fleet, holding no state for
// the keys the fleet uses. The simulator closes it at the end of the
// fleet's test; a store the factory also closes (a t.Cleanup of its own)
// must take a second Close without harm.
type Factory func(t *testing.T) core.Store

// Options tune Run for slower stores.
type Options struct {
	// Seeds is the number of random fleets per plan in each run (steady
	// and bursty fleets in turn). Default: 6.
	Seeds int
	// Steps is the number of requests of each fleet (half that in a key
	// flood). Default: 6000.
	Steps int
}

// t0 is a minute boundary: epoch-aligned windows of a second, a minute
// (and 100ms) start on it.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixMicro()

// leasable are the algorithms that lease.
var leasable = []core.Algorithm{core.FixedWindow, core.SlidingWindow, core.BucketedWindow, core.TokenBucket, core.GCRA}

// Run runs the simulator with default Options.
func Run(t *testing.T, newShared Factory) { RunWithOptions(t, newShared, Options{}) }

// RunWithOptions runs the simulator.
func RunWithOptions(t *testing.T, newShared Factory, o Options) {
	if o.Seeds <= 0 {
		o.Seeds = 6
	}
	if o.Steps <= 0 {
		o.Steps = 6000
	}
	open := func(t *testing.T) core.Store {
		t.Helper()
		s := newShared(t)
		t.Cleanup(func() { s.Close() })
		return s
	}
	t.Run("fleets never admit more than one store", func(t *testing.T) {
		for _, p := range fleetPlans() {
			t.Run(p.name, func(t *testing.T) {
				for seed := range uint64(o.Seeds) {
					simulate(t, open, seed, p.plan, o.Steps, seed%2 == 1)
				}
			})
		}
	})
	t.Run("a key flood keeps allowances bounded and invents no unit", func(t *testing.T) {
		for _, p := range singlePlans() {
			t.Run(p.name, func(t *testing.T) {
				for seed := range uint64(o.Seeds) {
					flood(t, open, seed, p.plan, o.Steps/2)
				}
			})
		}
	})
}

type namedPlan struct {
	name string
	plan *engine.Plan
}

// singlePlans are every leasable algorithm alone, and a TokenBucket and
// a GCRA with a burst as well (a window's Burst changes nothing).
func singlePlans() []namedPlan {
	var ps []namedPlan
	for _, alg := range leasable {
		ps = append(ps, namedPlan{alg.String(), planOf(LimitOf(alg, 200, 100*time.Millisecond))})
		if alg == core.TokenBucket || alg == core.GCRA {
			ps = append(ps, namedPlan{alg.String() + " with burst", planOf(LimitOf(alg, 200, 100*time.Millisecond).WithBurst(50))})
		}
	}
	return ps
}

// fleetPlans are the single plans and two limits together.
func fleetPlans() []namedPlan {
	return append(singlePlans(),
		namedPlan{"fixed and sliding windows together", planOf(
			LimitOf(core.FixedWindow, 300, 100*time.Millisecond), LimitOf(core.SlidingWindow, 1000, time.Second).Named("s"))},
		namedPlan{"token bucket and gcra together", planOf(
			LimitOf(core.TokenBucket, 300, 100*time.Millisecond), LimitOf(core.GCRA, 1000, time.Second).Named("g"))})
}

// LimitOf returns a limit of alg: quota per period, a BucketedWindow's in
// buckets of a tenth of it.
func LimitOf(alg core.Algorithm, quota int64, period time.Duration) core.Limit {
	l := core.Per(quota, period).WithAlgorithm(alg)
	if alg == core.BucketedWindow {
		l.Precision = period / 10
	}
	return l
}

func planOf(limits ...core.Limit) *engine.Plan { return storetest.Plan("", limits...) }

// fleetStore is the store a fleet's instances share, over the store
// under test: its Close does nothing (the simulator closes the store
// under it), and it counts the calls in flight, so that the simulator
// waits for the instances' background work without polling through round
// trips.
type fleetStore struct {
	core.Store
	mu   sync.Mutex
	idle sync.Cond // signalled when n drops to 0
	n    int
}

func newFleetStore(st core.Store) *fleetStore {
	fs := &fleetStore{Store: st}
	fs.idle.L = &fs.mu
	return fs
}

func (fs *fleetStore) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	fs.mu.Lock()
	fs.n++
	fs.mu.Unlock()
	defer func() {
		fs.mu.Lock()
		if fs.n--; fs.n == 0 {
			fs.idle.Broadcast()
		}
		fs.mu.Unlock()
	}()
	return fs.Store.Apply(ctx, op)
}

func (*fleetStore) Close() error { return nil }

// settle waits for the background work of the instances (renewals,
// give-backs), so that a fleet's trace is the same on every run: the
// shared store sees its operations in the order of their times.
func (fs *fleetStore) settle(fleet ...*lease.Store) {
	for _, st := range fleet {
		for hook.Pending(st) > 0 {
			fs.mu.Lock()
			for fs.n > 0 {
				fs.idle.Wait()
			}
			fs.mu.Unlock()
			runtime.Gosched() // between calls: µs of work
		}
	}
}

// newLease returns an instance over fs. Its calls of its own (renewals,
// give-backs) get a minute: one that timed out might still have charged
// the shared store, units that no count of the fleet would show.
func (fs *fleetStore) newLease(t *testing.T, opts ...lease.Option) *lease.Store {
	t.Helper()
	ls, err := lease.New(fs, append([]lease.Option{lease.WithTimeout(time.Minute)}, opts...)...)
	if err != nil {
		t.Fatalf("lease.New: %v", err)
	}
	return ls
}

// take applies a Take of cost at µs now through st and waits for the
// instance's background work.
func (fs *fleetStore) take(t *testing.T, st *lease.Store, plan *engine.Plan, key string, cost, now int64) engine.Result {
	t.Helper()
	res, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: key, Cost: cost, Now: now})
	if err != nil {
		t.Fatalf("Take(%q, %d) at +%dµs: %v", key, cost, now-t0, err)
	}
	fs.settle(st)
	return res
}

// tick ends the lots of every instance whose lease ended by now, as their
// timers do in real time, and waits for the give-backs.
func (fs *fleetStore) tick(fleet []*lease.Store, now int64) {
	for _, st := range fleet {
		hook.Expire(st, now)
	}
	fs.settle(fleet...)
}

// An Oracle is one exact state of one key (engine.Step on a plan), the
// single store every admission of a fleet must fit in: replay each
// admission on it, at its instant, and it must be admitted there too.
type Oracle struct {
	plan   *engine.Plan
	states []engine.State
}

// NewOracle returns the exact state of a key of plan that has seen nothing.
func NewOracle(plan *engine.Plan) *Oracle {
	return &Oracle{plan: plan, states: make([]engine.State, len(plan.Limits))}
}

// Admit replays a Take of cost at now (Unix µs), and reports whether the
// single store admits it.
func (o *Oracle) Admit(cost, now int64) bool {
	return o.apply(engine.Take, cost, now).Allowed
}

// Remaining returns what the single store has left at now.
func (o *Oracle) Remaining(now int64) int64 {
	return o.apply(engine.Peek, 0, now).Remaining
}

func (o *Oracle) apply(kind engine.Kind, cost, now int64) engine.Result {
	var res engine.Result
	op := engine.Op{Plan: o.plan, Key: "k", Kind: kind, Cost: cost}
	if _, err := engine.Step(&op, now, o.states, &res); err != nil {
		panic(err)
	}
	return res
}

// simulate runs the random fleet of seed on plan, steps requests, and
// checks it against the oracle. A steady fleet's demand is a stream of
// requests at random gaps; a bursty one's has spikes too, at one instant,
// some after a pause.
func simulate(t *testing.T, open func(*testing.T) core.Store, seed uint64, plan *engine.Plan, steps int, bursty bool) {
	rng := rand.New(rand.NewPCG(seed, 19))
	name := fmt.Sprintf("steady fleet %d", seed)
	if bursty {
		name = fmt.Sprintf("bursty fleet %d", seed)
	}
	shared := newFleetStore(open(t))
	n := 2 + rng.IntN(5)
	fleet := make([]*lease.Store, n)
	weight := make([]float64, n)
	var total float64
	for i := range fleet {
		fleet[i] = shared.newLease(t, lease.WithRenewInterval(time.Duration(1+rng.IntN(20))*time.Millisecond))
		weight[i] = 0.2 + rng.Float64()
		total += weight[i]
	}
	or := NewOracle(plan)
	base := NewOracle(plan) // the same requests, decided one by one
	var baseAdmitted int64
	// Demand: f times the first limit's rate, Q per P, in requests of 2
	// units on average, at gaps of gap/2 on average.
	l := plan.Limits[0]
	f := []int64{1, 2, 4, 8}[rng.IntN(4)] // in halves: ½× to 4×
	gap := 8 * l.Period / (f * l.Quota)
	now := t0 + rng.Int64N(l.Period)
	var admitted, asked, local, takes int64
	count := func(st *lease.Store) { s := st.Stats(); local += s.Local; takes += s.Local + s.Waits }
	capacity := plan.Limits[0].Capacity
	for _, l := range plan.Limits {
		capacity = min(capacity, l.Capacity)
	}
	spike := 0        // requests left of a spike, all at now
	reserved := false // the last request made a reservation
	for range steps {
		if spike == 0 {
			now += rng.Int64N(gap + 1)
			shared.tick(fleet, now)
		}
		i := 0
		for x := rng.Float64() * total; i < n-1 && x >= weight[i]; i++ {
			x -= weight[i]
		}
		if spike > 0 {
			spike--
		} else {
			switch r := rng.IntN(1000); {
			case r == 0: // a crash: the instance's slices are stranded
				count(fleet[i])
				fleet[i] = shared.newLease(t)
				continue
			case r == 1:
				fleet[i].Flush()
				continue
			case r == 2:
				// A Reset through every instance (an operator's, or a
				// rule reload's): the oracle forgets the key too.
				for _, st := range fleet {
					if _, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Reset, Now: now}); err != nil {
						t.Fatal(err)
					}
					shared.settle(st)
				}
				or, base = NewOracle(plan), NewOracle(plan)
				continue
			case bursty && (r < 4 || reserved && r < 20):
				// A pause, the buckets refilling while the instances
				// hold what they reserved, then a spike: the fleet asks
				// up to twice the capacity at one instant (two units a
				// request on average). Right after a reservation, the
				// pause ends shortly before the shared store is full
				// again, by when a token bucket's leases must have
				// ended; else it lasts up to a period.
				if reserved {
					res, err := shared.Store.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Peek, Now: now})
					if err != nil {
						t.Fatal(err)
					}
					now += max(res.Reset-rng.Int64N(l.Period/16), 0)
				} else {
					now += rng.Int64N(l.Period)
				}
				spike = rng.IntN(int(capacity))
				reserved = false
				continue
			case bursty && r < 22: // a spike alone
				spike = rng.IntN(int(capacity))
				continue
			}
		}
		cost := 1 + rng.Int64N(3)
		asked += cost
		if base.Admit(cost, now) {
			baseAdmitted += cost
		}
		before := fleet[i].Stats().Reservations
		if res := shared.take(t, fleet[i], plan, "k", cost, now); res.Allowed {
			admitted += cost
			if !or.Admit(cost, now) {
				t.Fatalf("%s: instance %d of %d admitted %d at +%dµs; the exact single store denies it (plan %+v)", name, i, n, cost, now-t0, plan.Limits)
			}
		}
		reserved = fleet[i].Stats().Reservations > before
	}
	for _, st := range fleet {
		count(st)
	}
	// Stranded slices (crashes, Resets) and the slices held when a window
	// ends cost some of the quota; per-request decisions are the mark. A
	// spike after a pause costs a leased token bucket more: it finds the
	// shared bucket r·L below full (see the lease package's documentation),
	// where per-request decisions find it full.
	mark := 0.9
	if bursty {
		mark = 0.85
	}
	if float64(admitted) < mark*float64(baseAdmitted) {
		t.Errorf("%s: %d instances admitted %d units, per-request decisions %d of %d asked: want at least %.0f%%", name, n, admitted, baseAdmitted, asked, 100*mark)
	}
	if testing.Verbose() {
		t.Logf("%s: %d instances at %.1f× the limit: admitted %d, per request %d (%.1f%%), asked %d; %.1f%% decided locally", name, n, float64(f)/2, admitted, baseAdmitted, 100*float64(admitted)/float64(baseAdmitted), asked, 100*float64(local)/float64(takes))
	}
}

// floodKeys is the number of keys of a key flood.
const floodKeys = 64

// flood runs the key flood of seed on plan: 1 to 3 instances, each
// keeping allowances for 2 to 7 keys, serve steps requests on floodKeys
// keys (key k about as often as k^-⅔: a few hot keys, many cold ones, each
// with a limit of its own); half of them give every key an allowance from
// its second request (lease.WithMinSlice), so that evictions are many.
func flood(t *testing.T, open func(*testing.T) core.Store, seed uint64, plan *engine.Plan, steps int) {
	rng := rand.New(rand.NewPCG(seed, 23))
	shared := newFleetStore(open(t))
	n := 1 + rng.IntN(3)
	fleet := make([]*lease.Store, n)
	maxKeys := make([]int, n)
	for i := range fleet {
		maxKeys[i] = 2 + rng.IntN(6)
		opts := []lease.Option{lease.WithMaxKeys(maxKeys[i]), lease.WithRenewInterval(time.Duration(1+rng.IntN(20)) * time.Millisecond)}
		if rng.IntN(2) == 0 {
			opts = append(opts, lease.WithMinSlice(1+rng.Int64N(8)))
		}
		fleet[i] = shared.newLease(t, opts...)
	}
	oracles := map[string]*Oracle{}
	// Demand: f times one key's limit, over every key.
	l := plan.Limits[0]
	f := []int64{2, 4, 8, 16}[rng.IntN(4)] // in halves: 1× to 8×
	gap := 8 * l.Period / (f * l.Quota)
	now := t0 + rng.Int64N(l.Period)
	var admitted, asked int64
	for range steps {
		now += rng.Int64N(gap + 1)
		shared.tick(fleet, now)
		i := rng.IntN(n)
		key := fmt.Sprint("key-", int(floodKeys*math.Pow(rng.Float64(), 3)))
		or := oracles[key]
		if or == nil {
			or = NewOracle(plan)
			oracles[key] = or
		}
		cost := 1 + rng.Int64N(3)
		asked += cost
		if res := shared.take(t, fleet[i], plan, key, cost, now); res.Allowed {
			admitted += cost
			if !or.Admit(cost, now) {
				t.Fatalf("seed %d: instance %d of %d admitted %d on %s at +%dµs; the exact single store denies it (plan %+v)", seed, i, n, cost, key, now-t0, plan.Limits)
			}
		}
		if got := fleet[i].Len(); got > maxKeys[i] {
			t.Fatalf("seed %d: instance %d keeps %d allowances, want at most %d (lease.WithMaxKeys)", seed, i, got, maxKeys[i])
		}
	}
	// Every unit held is given back or expires: what the shared store
	// shows of each key then differs from the exact store only by units
	// the fleet counted as expired (or burned, to lengthen leases).
	var stats lease.Stats
	for _, st := range fleet {
		st.Flush()
		shared.settle(st)
		s := st.Stats()
		stats.Expired += s.Expired
		stats.Burned += s.Burned
		stats.GiveBacks += s.GiveBacks
		stats.Returned += s.Returned
	}
	var short int64
	for key, or := range oracles {
		res, err := shared.Store.Apply(context.Background(), engine.Op{Plan: plan, Key: key, Kind: engine.Peek, Now: now})
		if err != nil {
			t.Fatalf("seed %d: shared Peek(%s): %v", seed, key, err)
		}
		want := or.Remaining(now)
		if res.Remaining > want {
			t.Errorf("seed %d: %s: the shared store shows %d remaining, the exact single store %d: units invented", seed, key, res.Remaining, want)
		}
		short += want - res.Remaining
	}
	if lost := stats.Expired + stats.Burned; short > lost {
		t.Errorf("seed %d: the shared store shows %d units fewer than the exact single store over the keys; the fleet counted %d expired and %d burned: units kept, or lost uncounted", seed, short, stats.Expired, stats.Burned)
	}
	if rated(plan) && stats.Returned != 0 {
		t.Errorf("seed %d: %d units given back under %v: a token bucket's units expire, never given back", seed, stats.Returned, plan.Limits[0].Algorithm)
	}
	if testing.Verbose() {
		t.Logf("seed %d: %d instances (max keys %v) at %.1f× one key's limit on %d keys: admitted %d of %d; %d units given back, %d expired, %d burned; the shared store shows %d fewer than the exact one",
			seed, n, maxKeys, float64(f)/2, len(oracles), admitted, asked, stats.Returned, stats.Expired, stats.Burned, short)
	}
}

// rated reports whether every limit of plan refills continuously
// (TokenBucket, GCRA).
func rated(plan *engine.Plan) bool {
	for i := range plan.Limits {
		if a := plan.Limits[i].Algorithm; a != engine.TokenBucket && a != engine.GCRA {
			return false
		}
	}
	return true
}
