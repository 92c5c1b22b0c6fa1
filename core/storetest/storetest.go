package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// Factory returns a new, empty store for one subtest. The suite closes it.
type Factory func(t *testing.T) core.Store

// Options tune Run for slower stores.
type Options struct {
	// Traces is the number of randomized traces. Default: 60.
	Traces int
	// Goroutines and Attempts size the no-over-admission test.
	// Defaults: 50 goroutines × 1000 attempts.
	Goroutines, Attempts int
	// Leased says the store decides Takes from allowances reserved on
	// another store (package lease), whose Results report the shared
	// state at the last reservation: the traces then hold it to never
	// admitting what engine.Step, fed the operations the store carried
	// out, would deny, instead of to identical Results; and they refund
	// no more than was charged (a Refund beyond a key's usage would give
	// back units an allowance holds). Default: false.
	Leased bool
}

// Epoch is the fake clock's start: 2026-01-01T00:00:00Z plus 0.123456 s, so
// that windows do not begin exactly on it.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 123456000, time.UTC)

// Run runs the whole suite with default Options.
func Run(t *testing.T, newStore Factory) { RunWithOptions(t, newStore, Options{}) }

// RunWithOptions runs the whole suite.
func RunWithOptions(t *testing.T, newStore Factory, o Options) {
	if o.Traces <= 0 {
		o.Traces = 60
	}
	if o.Goroutines <= 0 {
		o.Goroutines = 50
	}
	if o.Attempts <= 0 {
		o.Attempts = 1000
	}
	open := func(t *testing.T) core.Store {
		t.Helper()
		s := newStore(t)
		t.Cleanup(func() { s.Close() })
		return s
	}
	t.Run("every algorithm and operation matches engine.Step", func(t *testing.T) {
		for _, alg := range core.Algorithms() {
			t.Run(alg.String(), func(t *testing.T) {
				st := open(t)
				rng := rand.New(rand.NewPCG(uint64(alg)+1, 7))
				for i := 0; i < 4; i++ {
					tr := newTrace(rng, []core.Limit{randomLimit(rng, alg)}, 120)
					tr.leased = o.Leased
					tr.check(t, st, fmt.Sprintf("%s-%d", alg, i))
				}
			})
		}
	})
	t.Run("randomized multi-limit traces match engine.Step", func(t *testing.T) {
		st := open(t)
		rng := rand.New(rand.NewPCG(42, 43))
		for i := 0; i < o.Traces; i++ {
			n := 1 + rng.IntN(3)
			ls := make([]core.Limit, n)
			for j := range ls {
				ls[j] = randomLimit(rng, core.Algorithm(rng.IntN(len(core.Algorithms()))))
			}
			tr := newTrace(rng, ls, 80)
			tr.leased = o.Leased
			tr.check(t, st, fmt.Sprintf("trace-%d", i))
		}
	})
	t.Run("keys are independent", func(t *testing.T) { testIndependentKeys(t, open(t)) })
	t.Run("limiters sharing a store and a key keep their own limits", func(t *testing.T) { testSharedKey(t, open(t)) })
	t.Run("scopes separate keys", func(t *testing.T) { testScopes(t, open(t)) })
	t.Run("invalid input is an error and changes nothing", func(t *testing.T) { testInvalid(t, open(t)) })
	t.Run("keys of any bytes are safe and distinct", func(t *testing.T) { testOddKeys(t, open(t)) })
	t.Run("wide limits decide exactly, to the µs", func(t *testing.T) { testWideLimits(t, open(t)) })
	t.Run("refunds go back to the window they were taken from", func(t *testing.T) { testRefundsStayInTheirWindow(t, open(t)) })
	t.Run("a Concurrency limit's window counts the leases in flight", func(t *testing.T) { testConcurrencyWindow(t, open(t)) })
	t.Run("concurrent callers are admitted exactly the quota", func(t *testing.T) {
		testNoOverAdmission(t, open, o.Goroutines, o.Attempts)
	})
	t.Run("apply after close is an error", func(t *testing.T) {
		st := newStore(t)
		if err := st.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		_, err := st.Apply(context.Background(), engine.Op{Plan: Plan("", core.PerSecond(1)), Key: "k", Cost: 1, Now: Epoch.UnixMicro()})
		if !errors.Is(err, core.ErrClosed) {
			t.Errorf("Apply after Close: err = %v, want one wrapping core.ErrClosed", err)
		}
	})
}

// randomLimit returns a valid limit of algorithm alg, with sizes from tiny to
// huge (wide ones, past 2^47µs, compute exactly beyond 2^53).
func randomLimit(rng *rand.Rand, alg core.Algorithm) core.Limit {
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond, time.Second, 1500 * time.Millisecond, time.Minute, time.Hour, 24 * time.Hour}
	quotas := []int64{1, 2, 3, 5, 7, 10, 60, 100, 1000, 1_000_000, 1_000_000_000}
	for {
		l := core.Limit{
			Quota:     quotas[rng.IntN(len(quotas))],
			Period:    periods[rng.IntN(len(periods))],
			Algorithm: alg,
		}
		if rng.IntN(3) == 0 {
			l.Burst = 1 + rng.Int64N(2*l.Quota)
		}
		if alg == core.BucketedWindow {
			divs := []int64{1, 2, 3, 4, 5, 10, 60}
			l.Precision = l.Period / time.Duration(divs[rng.IntN(len(divs))])
		}
		if l.Validate() == nil {
			return l
		}
	}
}

// step is one operation of a trace.
type step struct {
	key  string
	kind engine.Kind
	cost int64
	now  time.Time
	pick uint32 // Release: which lease the key was issued; Refund: which receipt (see check)
}

type trace struct {
	limits []core.Limit
	plan   *engine.Plan
	steps  []step
	leased bool // see Options.Leased
}

func newTrace(rng *rand.Rand, limits []core.Limit, n int) trace {
	tr := trace{limits: limits, plan: Plan("", limits...)}
	minP := limits[0].Period
	for _, l := range limits {
		minP = min(minP, l.Period)
	}
	now := Epoch.Add(time.Duration(rng.Int64N(int64(time.Hour))))
	keys := []string{"a", "b", "a:b"}
	conc := false
	for _, l := range limits {
		conc = conc || l.Algorithm == core.Concurrency
	}
	for range n {
		// Time only moves forward: a store may forget a key once its state
		// is fully replenished, which is the same as keeping it only for a
		// clock that does not step back.
		switch r := rng.IntN(20); {
		case r < 8: // often no time passes: bursts
		case r < 15:
			now = now.Add(time.Duration(rng.Int64N(int64(minP)/3 + 1)))
		case r < 19:
			now = now.Add(time.Duration(rng.Int64N(int64(minP)*2 + 1)))
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(30 * 24 * time.Hour))))
		}
		now = now.Truncate(time.Microsecond)
		cp := limits[0].Capacity()
		costs := []int64{0, 1, 1, 1, 2, 3, cp, cp + 1, max(cp/2, 1)}
		s := step{key: keys[rng.IntN(len(keys))], kind: engine.Take, cost: costs[rng.IntN(len(costs))], now: now}
		switch r := rng.IntN(20); {
		case r < 2:
			s.kind = engine.Peek
		case r < 4:
			s.kind = engine.Charge
			s.cost = []int64{1, 10, cp * 3, math.MaxInt64}[rng.IntN(4)]
		case r < 6:
			s.kind = engine.Refund
			s.cost = []int64{1, 5, cp, math.MaxInt64}[rng.IntN(4)]
			s.pick = rng.Uint32()
		case r < 7:
			s.kind = engine.Reset
			s.cost = 0
		case r < 12 && conc:
			s.kind, s.cost, s.pick = engine.Release, 0, rng.Uint32()
		}
		tr.steps = append(tr.steps, s)
	}
	return tr
}

// check runs the trace on st (keys prefixed by name, so traces sharing a
// store do not meet) and compares every Result with engine.Step's.
func (tr trace) check(t *testing.T, st core.Store, name string) {
	t.Helper()
	ref := map[string][]engine.State{}
	leases := map[string][]int64{}            // the leases issued on each key
	receipts := map[string][]engine.Receipt{} // the charges made on each key
	ctx := context.Background()
	for i, s := range tr.steps {
		op := engine.Op{Plan: tr.plan, Kind: s.kind, Key: name + "/" + s.key, Cost: s.cost, Now: s.now.UnixMicro()}
		if s.kind == engine.Release {
			// A lease the key was issued, live, released or expired; now
			// and then one it never was.
			if ls := leases[s.key]; len(ls) > 0 && s.pick%8 != 0 {
				op.Lease = ls[int(s.pick)%len(ls)]
			} else {
				op.Lease = op.Now + int64(s.pick%1000)
			}
		}
		if rs := receipts[s.key]; s.kind == engine.Refund && len(rs) > 0 && s.pick%4 != 0 {
			// A charge of the key's, of this window or long gone; now and
			// then one whose time is known only within a span.
			rc := rs[int(s.pick/4)%len(rs)]
			if s.pick%7 == 0 {
				rc.Span = min(int64(s.pick%5_000_000), rc.At)
			}
			op.Receipt = &rc
		}
		states, ok := ref[s.key]
		if !ok {
			states = make([]engine.State, len(tr.limits))
			ref[s.key] = states
		}
		if tr.leased {
			tr.checkLeased(t, st, name, i, op, states)
			continue
		}
		var want engine.Result
		_, werr := engine.Step(&op, op.Now, states, &want)
		got, gerr := st.Apply(ctx, op)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s step %d: %s(%q, cost %d) at %v: err = %v, want %v (limits %v)", name, i, s.kind, s.key, s.cost, s.now, gerr, werr, tr.limits)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s step %d: %s(%q, cost %d, lease %d) at +%v:\n got %+v\nwant %+v\nlimits %v\n%s", name, i, s.kind, s.key, s.cost, op.Lease, s.now.Sub(Epoch), got, want, tr.limits, tr.history(i))
		}
		if want.Lease != 0 {
			leases[s.key] = append(leases[s.key], want.Lease)
		}
		if werr == nil && s.cost > 0 && (s.kind == engine.Take && want.Allowed || s.kind == engine.Charge) {
			receipts[s.key] = append(receipts[s.key], engine.ReceiptOf(&want, s.cost))
		}
	}
}

// checkLeased applies step i (op) of the trace to a leased store and to
// the reference states: a Take the store admits must be one Step admits;
// a Take it denies is not applied to the reference (it charged nothing);
// other operations apply to both. A Refund gives back at most what the
// reference holds, as a refund of admitted requests would.
func (tr trace) checkLeased(t *testing.T, st core.Store, name string, i int, op engine.Op, states []engine.State) {
	t.Helper()
	if op.Kind == engine.Refund {
		var peek engine.Result
		p := op
		p.Kind, p.Cost = engine.Peek, 0
		snapshot := append([]engine.State(nil), states...)
		engine.Step(&p, op.Now, snapshot, &peek)
		used := int64(math.MaxInt64) // the least usage over the limits
		for j, l := range tr.plan.Limits {
			r := peek.Remaining
			if len(peek.Limits) > 0 {
				r = peek.Limits[j].Remaining
			}
			used = min(used, l.Capacity-r)
		}
		op.Cost = min(op.Cost, max(used, 0))
	}
	got, gerr := st.Apply(context.Background(), op)
	var want engine.Result
	ref := op
	if op.Kind == engine.Take && (gerr != nil || !got.Allowed) {
		ref.Kind = engine.Peek // the store charged nothing
	}
	_, werr := engine.Step(&ref, op.Now, states, &want)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s step %d: %s(%q, cost %d): err = %v, want %v (limits %v)", name, i, op.Kind, op.Key, op.Cost, gerr, werr, tr.limits)
	}
	if op.Kind == engine.Take && got.Allowed && !want.Allowed {
		t.Fatalf("%s step %d: Take(%q, cost %d) at +%v admitted; engine.Step denies it (limits %v)\n%s", name, i, op.Key, op.Cost, time.UnixMicro(op.Now).Sub(Epoch), tr.limits, tr.history(i))
	}
}

// history describes the steps up to i of the key of step i.
func (tr trace) history(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "steps on key %q so far:\n", tr.steps[i].key)
	for j, s := range tr.steps[:i+1] {
		if s.key == tr.steps[i].key {
			fmt.Fprintf(&b, "  %3d %-6s cost %-20d at +%v\n", j, s.kind, s.cost, s.now.Sub(Epoch))
		}
	}
	return b.String()
}

func testIndependentKeys(t *testing.T, st core.Store) {
	ctx := context.Background()
	lim := []core.Limit{core.PerMinute(2)}
	take := func(key string) engine.Result {
		t.Helper()
		d, err := st.Apply(ctx, engine.Op{Plan: Plan("", lim...), Key: key, Cost: 1, Now: Epoch.UnixMicro()})
		if err != nil {
			t.Fatalf("Apply(%q) error: %v", key, err)
		}
		return d
	}
	for _, k := range []string{"x", "x", "x"} {
		take(k)
	}
	for _, k := range []string{"y", "x:", "X", "x ", " x", "xx"} {
		if d := take(k); !d.Allowed || d.Remaining != 1 {
			t.Errorf("first Take of %q after 3 of %q = %+v, want allowed with 1 remaining", k, "x", d)
		}
	}
}

// testSharedKey: two limiters with different limits (an app-wide one and a
// route's own, both keyed by client IP) share one store and key. State is
// per key and limit layout, so neither may reset the other's usage.
func testSharedKey(t *testing.T, st core.Store) {
	ctx := context.Background()
	app := []core.Limit{core.PerMinute(5), core.PerHour(50).WithAlgorithm(core.GCRA)}
	route := []core.Limit{core.PerMinute(20).WithAlgorithm(core.FixedWindow)}
	for i := 1; i <= 6; i++ {
		da, err := st.Apply(ctx, engine.Op{Plan: Plan("", app...), Key: "10.0.0.1", Cost: 1, Now: Epoch.UnixMicro()})
		if err != nil {
			t.Fatal(err)
		}
		dr, err := st.Apply(ctx, engine.Op{Plan: Plan("", route...), Key: "10.0.0.1", Cost: 3, Now: Epoch.UnixMicro()})
		if err != nil {
			t.Fatal(err)
		}
		if want := i <= 5; da.Allowed != want {
			t.Errorf("app-wide Take #%d after %d route Takes: Allowed = %v, want %v (%+v)", i, i-1, da.Allowed, want, da)
		}
		if want := i <= 6; dr.Allowed != want || dr.Remaining != 20-3*int64(i) {
			t.Errorf("route Take #%d (cost 3): Allowed %v Remaining %d, want %v and %d", i, dr.Allowed, dr.Remaining, want, 20-3*i)
		}
	}
}

// testScopes: the same key and the same limits in two scopes (two Limiters
// named differently) are two keys.
func testScopes(t *testing.T, st core.Store) {
	ctx := context.Background()
	lim := []core.Limit{core.PerMinute(10)}
	for _, scope := range []string{"app", "search"} {
		for i := 0; i < 3; i++ {
			if _, err := st.Apply(ctx, engine.Op{Plan: Plan(scope, lim...), Key: "10.0.0.1", Cost: 2, Now: Epoch.UnixMicro()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, scope := range []string{"app", "search", ""} {
		d, err := st.Apply(ctx, engine.Op{Plan: Plan(scope, lim...), Kind: engine.Peek, Key: "10.0.0.1", Now: Epoch.UnixMicro()})
		if err != nil {
			t.Fatal(err)
		}
		want := int64(4)
		if scope == "" {
			want = 10
		}
		if d.Remaining != want {
			t.Errorf("Peek in scope %q: Remaining = %d, want %d", scope, d.Remaining, want)
		}
	}
}

func testInvalid(t *testing.T, st core.Store) {
	ctx := context.Background()
	good := Plan("", core.PerMinute(5))
	bad := []struct {
		name string
		op   engine.Op
		want error
	}{
		{"negative cost", engine.Op{Plan: good, Key: "k", Cost: -1}, core.ErrInvalidCost},
		{"empty key", engine.Op{Plan: good, Key: "", Cost: 1}, core.ErrInvalidKey},
		{"no plan", engine.Op{Key: "k", Cost: 1}, core.ErrInvalidOp},
		{"a plan without limits", engine.Op{Plan: &engine.Plan{}, Key: "k", Cost: 1}, core.ErrInvalidOp},
		{"unknown kind", engine.Op{Plan: good, Kind: 99, Key: "k", Cost: 1}, core.ErrInvalidOp},
	}
	if _, err := st.Apply(ctx, engine.Op{Plan: good, Key: "k", Cost: 2, Now: Epoch.UnixMicro()}); err != nil {
		t.Fatalf("Take error: %v", err)
	}
	for _, b := range bad {
		b.op.Now = Epoch.UnixMicro()
		if _, err := st.Apply(ctx, b.op); !errors.Is(err, b.want) {
			t.Errorf("%s: err = %v, want one wrapping %v", b.name, err, b.want)
		}
	}
	d, err := st.Apply(ctx, engine.Op{Plan: good, Kind: engine.Peek, Key: "k", Now: Epoch.UnixMicro()})
	if err != nil || d.Remaining != 3 {
		t.Errorf("Peek after invalid ops = %+v, %v; want 3 remaining, as before them", d, err)
	}
}

func testOddKeys(t *testing.T, st core.Store) {
	ctx := context.Background()
	keys := []string{
		"with space", "{braces}", "}{", "{", "}", "new\nline", "nul\x00byte", "ünïcödé ✓", "\xff\xfe invalid utf-8",
		strings.Repeat("k", 10<<10), strings.Repeat("k", 10<<10) + "!", strings.Repeat("{", 300),
	}
	lim := []core.Limit{core.PerHour(len64(keys) + 1).WithAlgorithm(core.FixedWindow)}
	for i, k := range keys {
		// Key i takes i+1 units; every key must then show its own usage.
		if _, err := st.Apply(ctx, engine.Op{Plan: Plan("", lim...), Key: k, Cost: int64(i + 1), Now: Epoch.UnixMicro()}); err != nil {
			t.Fatalf("Take(%.40q) error: %v", k, err)
		}
	}
	for i, k := range keys {
		d, err := st.Apply(ctx, engine.Op{Plan: Plan("", lim...), Kind: engine.Peek, Key: k, Now: Epoch.UnixMicro()})
		if err != nil {
			t.Fatalf("Peek(%.40q) error: %v", k, err)
		}
		if want := lim[0].Quota - int64(i+1); d.Remaining != want {
			t.Errorf("Peek(%.40q).Remaining = %d, want %d", k, d.Remaining, want)
		}
	}
}

func len64[T any](s []T) int64 { return int64(len(s)) }

// testWideLimits: limits whose Capacity × Period passes 2^47µs, whose
// products pass 2^53, decide exactly: a bucket drained (or a debt
// saturated) at any µs refills from that instant, to the µs.
func testWideLimits(t *testing.T, st core.Store) {
	ctx := context.Background()
	day := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC) // a boundary of every tick
	const us = time.Microsecond
	type op struct {
		at      time.Duration // since day
		kind    engine.Kind
		cost    int64
		allowed bool
		rem     int64 // Remaining
	}
	tests := []struct {
		name  string
		limit core.Limit
		ops   []op
	}{
		{
			// A token every 8.64ms: the halves of the burst pass as the
			// whole does, and the next token after exactly 8640µs.
			"ten million a day drained at 9999µs", core.PerDay(10_000_000), []op{
				{9999 * us, engine.Take, 5_000_000, true, 5_000_000},
				{9999 * us, engine.Take, 5_000_000, true, 0},
				{10_000 * us, engine.Take, 1, false, 0},
				{18_638 * us, engine.Take, 1, false, 0},
				{18_639 * us, engine.Take, 1, true, 0},
			},
		},
		{
			// 1µs refills 2^47/1e6 = 140737488.36 tokens.
			"MaxQuota a second drained 1µs before a second", core.PerSecond(core.MaxQuota), []op{
				{999_999 * us, engine.Take, core.MaxQuota, true, 0},
				{time.Second, engine.Take, core.MaxQuota, false, 140_737_488},
				{time.Second, engine.Take, 140_737_489, false, 140_737_488},
				{time.Second, engine.Take, 140_737_488, true, 0},
			},
		},
		{
			// Usage saturates at DebtFactor × capacity at 999999µs: 64s
			// and 1µs of refill later, 140737488.36 tokens are back.
			"MaxQuota a second saturated 1µs before a second", core.PerSecond(core.MaxQuota), []op{
				{999_999 * us, engine.Charge, math.MaxInt64, false, 0},
				{63*time.Second + 999_999*us, engine.Take, 1, false, 0},
				{64 * time.Second, engine.Take, 140_737_489, false, 140_737_488},
				{64 * time.Second, engine.Take, 140_737_488, true, 0},
			},
		},
	}
	for _, tt := range tests {
		for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA, core.LeakyBucket} {
			l := tt.limit.WithAlgorithm(alg)
			key := "wide " + tt.name + " " + alg.String()
			for i, o := range tt.ops {
				d, err := st.Apply(ctx, engine.Op{Plan: Plan("", l), Kind: o.kind, Key: key, Cost: o.cost, Now: day.Add(o.at).UnixMicro()})
				if err != nil {
					t.Fatalf("%s, %v, op %d: Apply error: %v", tt.name, alg, i, err)
				}
				if d.Allowed != o.allowed || d.Remaining != o.rem {
					t.Errorf("%s, %v: %s(+%v, %d) = allowed %v, %d remaining; want %v, %d", tt.name, alg, o.kind, o.at, o.cost, d.Allowed, d.Remaining, o.allowed, o.rem)
				}
			}
		}
	}
}

// testNoOverAdmission hammers one key from many goroutines at a frozen
// instant, where every algorithm admits exactly ⌊capacity / cost⌋.
func testNoOverAdmission(t *testing.T, open func(*testing.T) core.Store, goroutines, attempts int) {
	for _, alg := range core.Algorithms() {
		for _, cost := range []int64{1, 3} {
			t.Run(fmt.Sprintf("%s cost %d", alg, cost), func(t *testing.T) {
				st := open(t)
				l := core.Per(500, time.Hour).WithAlgorithm(alg)
				if alg.String() == "bucketed-window" {
					l.Precision = time.Minute
				}
				want := l.Capacity() / cost
				plan := Plan("", l)
				var admitted atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, goroutines)
				for range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range attempts {
							d, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: "hot", Cost: cost, Now: Epoch.UnixMicro()})
							if err != nil {
								errs <- err
								return
							}
							if d.Allowed {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatalf("Apply error: %v", err)
				}
				if got := admitted.Load(); got != want {
					t.Errorf("%d goroutines × %d attempts of cost %d admitted %d, want exactly %d", goroutines, attempts, cost, got, want)
				}
			})
		}
	}
}

// Compile compiles l for the engine, as a core.Limiter does.
func Compile(l core.Limit) (engine.Limit, error) {
	return engine.Compile(engine.Spec{Name: l.Name, Algorithm: engine.Algorithm(l.Algorithm), Quota: l.Quota,
		Period: l.Period, Burst: l.Burst, Precision: l.Precision})
}

// Plan compiles limits (valid) into the plan of scope, as a core.Limiter
// prepares it, for stores' tests. It panics on an invalid limit.
func Plan(scope string, limits ...core.Limit) *engine.Plan {
	cl := make([]engine.Limit, len(limits))
	for i, l := range limits {
		c, err := Compile(l)
		if err != nil {
			panic("storetest.Plan: " + err.Error())
		}
		cl[i] = c
	}
	p, err := engine.NewPlan(scope, cl)
	if err != nil {
		panic("storetest.Plan: " + err.Error())
	}
	return p
}

// testConcurrencyWindow checks a Concurrency limit's effective window
// where a released lease, or leases issued ahead of the clock, could
// mislead it: the window is when one more unit would pass had the key
// taken all it has left now, so it starts at the oldest lease still in
// flight, or, with none, at the lease the next Take would get.
func testConcurrencyWindow(t *testing.T, st core.Store) {
	ctx := context.Background()
	plan := Plan("", core.InFlight(10, time.Hour))
	hour := time.Hour.Microseconds()
	t0 := Epoch.UnixMicro()
	applyTo := func(plan *engine.Plan, key string, kind engine.Kind, now, cost, lease int64) engine.Result {
		t.Helper()
		res, err := st.Apply(ctx, engine.Op{Plan: plan, Kind: kind, Key: key, Cost: cost, Now: now, Lease: lease})
		if err != nil {
			t.Fatalf("%s %s at t0+%dµs: %v", key, kind, now-t0, err)
		}
		return res
	}
	apply := func(key string, kind engine.Kind, now, cost, lease int64) engine.Result {
		t.Helper()
		return applyTo(plan, key, kind, now, cost, lease)
	}
	// Leases at t0, t0+10 and t0+20; the middle one released; the first
	// one expired: the t0+20 lease is the oldest in flight.
	for _, at := range []int64{0, 10, 20} {
		apply("released", engine.Take, t0+at, 1, 0)
	}
	apply("released", engine.Release, t0+30, 0, t0+10)
	if got := apply("released", engine.Peek, t0+hour+5, 1, 0); got.Window != 15 {
		t.Errorf("window after the oldest lease expired and the next was released: %dµs, want 15 (the t0+20 lease ends at t0+1h+20)", got.Window)
	}
	// Three leases in one µs (t0, t0+1, t0+2), all released: the next
	// Take gets t0+3, and its unit ends an hour after that.
	var leases []int64
	for range 3 {
		leases = append(leases, apply("ahead", engine.Take, t0, 1, 0).Lease)
	}
	for _, l := range leases {
		apply("ahead", engine.Release, t0, 0, l)
	}
	if got := apply("ahead", engine.Peek, t0, 1, 0); got.Window != hour+3 {
		t.Errorf("window with every lease released, the newest 2µs ahead of the clock: %dµs, want %d (the next lease is t0+3)", got.Window, hour+3)
	}
	// The same, then a plan that shares that limit and adds one of its
	// own, fresh: a Take through it gets t0+3 on both (a lease is one
	// over the plan), so the binding limit's window starts there too.
	both := Plan("", core.InFlight(10, time.Hour), core.InFlight(5, 2*time.Hour))
	if got := applyTo(both, "ahead", engine.Peek, t0, 1, 0); got.Window != 2*hour+3 {
		t.Errorf("window of a plan whose other Concurrency limit issued leases ahead of the clock: %dµs, want %d (the next lease is t0+3)", got.Window, 2*hour+3)
	}
	if got := applyTo(both, "ahead", engine.Take, t0, 5, 0); got.Lease != t0+3 {
		t.Errorf("lease of that plan's Take: t0+%dµs, want t0+3", got.Lease-t0)
	}
}
