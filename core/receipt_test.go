package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
)

// A Decision that charged has a receipt, one that did not has none, and a
// refund with the latter gives nothing back.
func TestReceiptsOfDecisions(t *testing.T) {
	ctx := context.Background()
	clock := &fixedClock{t: time.Date(2026, 1, 1, 0, 0, 59, 0, time.UTC)}
	lim, err := core.New(memstore.New(memstore.WithClock(clock)), core.PerMinute(2).WithAlgorithm(core.FixedWindow), core.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	d, err := lim.AllowN(ctx, "k", 2)
	if err != nil || !d.Allowed {
		t.Fatalf("AllowN(2) = %+v, %v; want allowed", d, err)
	}
	r := d.Receipt()
	if !r.Charged() || r.Cost() != 2 || !r.At().Equal(clock.t) {
		t.Fatalf("Receipt() = charged %t, cost %d, at %v; want true, 2, %v", r.Charged(), r.Cost(), r.At(), clock.t)
	}
	denied, _ := lim.Allow(ctx, "k")
	if denied.Allowed || denied.Receipt().Charged() {
		t.Fatalf("a denied Decision's receipt is charged (%+v)", denied)
	}
	peek, _ := lim.Peek(ctx, "k")
	if peek.Receipt().Charged() {
		t.Error("a Peek's receipt is charged")
	}
	if rd, err := lim.RefundTo(ctx, "k", core.Receipt{}, 5); err != nil || !rd.Allowed {
		t.Errorf("RefundTo(zero Receipt) = %+v, %v; want allowed, no error", rd, err)
	}
	if p, _ := lim.Peek(ctx, "k"); p.Remaining != 0 {
		t.Errorf("after a refund with no receipt, Remaining = %d, want 0", p.Remaining)
	}
	if _, err := lim.RefundTo(ctx, "k", r, -1); !errors.Is(err, core.ErrInvalidCost) {
		t.Errorf("RefundTo(cost -1) error = %v, want ErrInvalidCost", err)
	}
	// Within the window, the refund gives the units back; the receipt's
	// cost bounds it.
	if rd, err := lim.RefundTo(ctx, "k", r, 10); err != nil || rd.Remaining != 2 {
		t.Errorf("RefundTo(10) = %+v, %v; want Remaining 2", rd, err)
	}
	// After the window, a refund of its charge gives nothing.
	d, _ = lim.AllowN(ctx, "k", 2)
	clock.t = clock.t.Add(2 * time.Second)
	lim.AllowN(ctx, "k", 2)
	if rd, err := lim.RefundTo(ctx, "k", d.Receipt(), 2); err != nil || rd.Remaining != 0 {
		t.Errorf("RefundTo after the window = %+v, %v; want Remaining 0", rd, err)
	}
}

// Units the Fallback store charged go back there, not to the primary
// store, which never held them; a FailOpen decision has nothing to refund.
func TestRefundToFollowsTheFallback(t *testing.T) {
	ctx := context.Background()
	primary := &flakyStore{}
	primary.fail(errDown)
	fb := memstore.New()
	lim, err := core.New(primary, core.PerMinute(3), core.WithFailurePolicy(core.Fallback(fb)), core.WithBreaker(core.Breaker{Disabled: true}))
	if err != nil {
		t.Fatal(err)
	}
	d, err := lim.AllowN(ctx, "k", 3)
	if err != nil || !d.Allowed || d.Source != core.FromFallback {
		t.Fatalf("AllowN = %+v, %v; want allowed by the fallback", d, err)
	}
	primary.err.Store(nil) // the primary is back
	before := primary.calls.Load()
	if _, err := lim.RefundTo(ctx, "k", d.Receipt(), 3); err != nil {
		t.Fatal(err)
	}
	if primary.calls.Load() != before {
		t.Error("the refund of the fallback's units went to the primary store")
	}
	fbLim, _ := core.New(fb, core.PerMinute(3))
	if p, _ := fbLim.Peek(ctx, "k"); p.Remaining != 3 {
		t.Errorf("the fallback store's Remaining after the refund = %d, want 3", p.Remaining)
	}

	open := &flakyStore{}
	open.fail(errDown)
	lo, _ := core.New(open, core.PerMinute(3), core.WithFailurePolicy(core.FailOpen), core.WithBreaker(core.Breaker{Disabled: true}))
	d, _ = lo.AllowN(ctx, "k", 3)
	if d.Source != core.FromFailOpen || d.Receipt().Charged() {
		t.Fatalf("FailOpen decision %+v has a charged receipt", d)
	}
	open.err.Store(nil)
	before = open.calls.Load()
	if _, err := lo.RefundTo(ctx, "k", d.Receipt(), 3); err != nil || open.calls.Load() != before {
		t.Errorf("RefundTo of a FailOpen decision: err %v, %d store calls; want none", err, open.calls.Load()-before)
	}
}

// A receipt goes only with a refund, and is well formed.
func TestReceiptValidation(t *testing.T) {
	plan, err := engine.NewPlan("", []engine.Limit{mustCompile(t, core.PerMinute(2))})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		op   engine.Op
	}{
		{"a take", engine.Op{Plan: plan, Key: "k", Kind: engine.Take, Cost: 1, Receipt: &engine.Receipt{At: 1, Cost: 1}}},
		{"no time", engine.Op{Plan: plan, Key: "k", Kind: engine.Refund, Cost: 1, Receipt: &engine.Receipt{Cost: 1}}},
		{"a negative span", engine.Op{Plan: plan, Key: "k", Kind: engine.Refund, Cost: 1, Receipt: &engine.Receipt{At: 5, Span: -1, Cost: 1}}},
		{"a span before the epoch", engine.Op{Plan: plan, Key: "k", Kind: engine.Refund, Cost: 1, Receipt: &engine.Receipt{At: 5, Span: 6, Cost: 1}}},
		{"a negative cost", engine.Op{Plan: plan, Key: "k", Kind: engine.Refund, Cost: 1, Receipt: &engine.Receipt{At: 5, Cost: -1}}},
	} {
		if err := tc.op.Validate(); !errors.Is(err, engine.ErrInvalidOp) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidOp", tc.name, err)
		}
	}
}

func mustCompile(t *testing.T, l core.Limit) engine.Limit {
	t.Helper()
	c, err := engine.Compile(engine.Spec{Name: l.Name, Algorithm: engine.Algorithm(l.Algorithm), Quota: l.Quota, Period: l.Period, Burst: l.Burst, Precision: l.Precision})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

// A LeakyBucket is a queue: each admitted request gets its turn, one
// interval after the previous one's. A refund of a request with later
// turns behind it gives nothing back, so that the next request is not
// given one of those turns (two requests would leave at once); its turn
// passes empty. The last request's refund gives its turn back, and then
// the one before it is the last, and its refund gives back too. GCRA, the
// same machine as a rate limit, gives back in every case.
func TestALeakyBucketRefundNeverGivesOutATakenTurn(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []core.Algorithm{core.LeakyBucket, core.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			clock := &fixedClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			lim, err := core.New(memstore.New(memstore.WithClock(clock)), core.PerSecond(10).WithBurst(10).WithAlgorithm(alg), core.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			take := func() core.Decision {
				t.Helper()
				d, err := lim.Allow(ctx, "k")
				if err != nil || !d.Allowed {
					t.Fatalf("Allow = %+v, %v; want allowed", d, err)
				}
				return d
			}
			refund := func(d core.Decision) {
				t.Helper()
				if _, err := lim.RefundTo(ctx, "k", d.Receipt(), 1); err != nil {
					t.Fatal(err)
				}
			}
			take()         // turn 0
			mid := take()  // turn 100ms
			last := take() // turn 200ms
			refund(mid)
			next := take()
			const want = 300 * time.Millisecond // after last's turn: mid's passes empty
			if alg == core.LeakyBucket && next.Delay != want {
				t.Fatalf("after a refund of the middle turn, the next request waits %v, want %v", next.Delay, want)
			}
			if alg == core.GCRA && next.Remaining != 7 { // 10 − 4 taken + 1 given back
				t.Fatalf("after a refund, GCRA leaves %d, want 7", next.Remaining)
			}
			refund(next) // the last: its turn comes back
			if again := take(); alg == core.LeakyBucket && again.Delay != want {
				t.Fatalf("after a refund of the last turn, the next request waits %v, want %v", again.Delay, want)
			}
			refund(last) // not the last any more (again is): nothing back
			if d := take(); alg == core.LeakyBucket && d.Delay != want+100*time.Millisecond {
				t.Fatalf("after a refund of a turn before the last, the next request waits %v, want %v", d.Delay, want+100*time.Millisecond)
			}
		})
	}
}
