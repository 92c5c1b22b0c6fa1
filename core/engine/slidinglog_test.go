package engine_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// SlidingLog: an entry (ts, c) counts while t < ts + P; cost c passes when
// the live entries' costs + c ≤ Q, else it waits until enough of the oldest
// entries have expired. ResetAfter runs to the newest entry's expiry.
func TestSlidingLogSteps(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	l := core.PerSecond(3).WithAlgorithm(core.SlidingLog) // Q=3, P=1s
	runTable(t, l, []row{
		{"the first request is logged at t0", 0, engine.Take, 1, ok(2, time.Second)},
		{"a second at 0.3s", 300 * ms, engine.Take, 1, ok(1, time.Second)},
		{"a third at 0.6s uses the quota up", 600 * ms, engine.Take, 1, ok(0, time.Second)},
		// Live: t0, 0.3s, 0.6s. Excess 1: the entry of t0 expires at t0+1s.
		{"a fourth waits for the oldest entry to expire", 700 * ms, engine.Take, 1, denied(0, 900*ms, 300*ms)},
		{"1µs before the oldest entry expires it still counts", time.Second - us, engine.Take, 1, denied(0, 600*ms+us, us)},
		{"at exactly ts+P it no longer counts", time.Second, engine.Take, 1, ok(0, time.Second)},
		// Live: 0.3s, 0.6s, 1s. Excess 2: the two oldest, the second at 1.6s.
		{"a weighted cost of 2 waits for the two oldest entries", 1100 * ms, engine.Take, 2, denied(0, 900*ms, 500*ms)},
		{"and passes when they have expired", 1600 * ms, engine.Take, 2, ok(0, time.Second)},     // live: 1s (1), 1.6s (2)
		{"a refund comes off the newest entry", 1600 * ms, engine.Refund, 1, ok(1, time.Second)}, // 1.6s (1)
		// Live: 1s (1), 1.6s (1+4). Excess 6−3 = 3: both entries, until 2.6s.
		{"a post-hoc charge joins the newest entry and goes over the quota", 1600 * ms, engine.Charge, 4, denied(0, time.Second, time.Second)},
		{"a peek of 0 is denied while the overage is live", 2 * time.Second, engine.Peek, 0, denied(0, 600*ms, 600*ms)}, // live: 1.6s (5)
		{"a refund larger than the usage empties the log", 2 * time.Second, engine.Refund, 9, ok(3, 0)},
		{"the whole quota passes at once", 2 * time.Second, engine.Take, 3, ok(0, time.Second)},
		{"a cost above the quota is denied for ever", 2 * time.Second, engine.Take, 4, denied(0, time.Second, core.Never)},
		{"reset empties the log", 2500 * ms, engine.Reset, 0, ok(3, 0)},
		{"cost 0 on an empty log is allowed", 2500 * ms, engine.Take, 0, ok(3, 0)},
	})
}

// BucketedWindow: a cost taken at t counts in bucket b = ⌊t/p⌋ until
// (b+n)·p, n = P/p; c passes when the live buckets' counts + c ≤ Q.
func TestBucketedWindowSteps(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	// Q=4, P=1s, p=250ms: n=4 buckets; bucket k (from t0) is live until
	// t0 + (k+4)·250ms.
	l := core.PerSecond(4).WithAlgorithm(core.BucketedWindow).WithPrecision(250 * ms)
	runTable(t, l, []row{
		{"a cost of 2 at 0.1s counts in bucket 0, live until 1s", 100 * ms, engine.Take, 2, ok(2, 900*ms)},
		{"one at 0.3s counts in bucket 1, live until 1.25s", 300 * ms, engine.Take, 1, ok(1, 950*ms)},
		{"one at 0.6s counts in bucket 2, live until 1.5s", 600 * ms, engine.Take, 1, ok(0, 900*ms)},
		{"a fifth waits for bucket 0 to expire at 1s", 900 * ms, engine.Take, 1, denied(0, 600*ms, 100*ms)},
		{"1µs before, bucket 0 still counts", time.Second - us, engine.Take, 2, denied(0, 500*ms+us, us)},
		{"at exactly (0+4)·p bucket 0 has expired", time.Second, engine.Take, 2, ok(0, time.Second)}, // bucket 4, live until 2s
		// Live: bucket 1 (1), 2 (1), 4 (2). Excess 2: buckets 1 and 2, until
		// 1.5s: a whole bucket early for the request of 0.3s, whose own
		// timestamp would expire at 1.3s: exact at bucket granularity only.
		{"a cost of 2 waits for buckets 1 and 2", 1200 * ms, engine.Take, 2, denied(0, 800*ms, 300*ms)},
		{"at 1.25s bucket 1 has expired", 1250 * ms, engine.Peek, 1, ok(1, 750*ms)},
		{"a charge joins the current bucket and goes over the quota", 1300 * ms, engine.Charge, 3, denied(0, 950*ms, 700*ms)}, // live 2 (1), 4 (2), 5 (3): excess 2, until bucket 4 expires at 2s
		{"a refund comes off the newest bucket", 1300 * ms, engine.Refund, 2, ok(0, 950*ms)},                                  // 2 (1), 4 (2), 5 (1)
		{"a cost above the quota is denied for ever", 1300 * ms, engine.Take, 5, denied(0, 950*ms, core.Never)},
		{"two periods later every bucket has expired", 3 * time.Second, engine.Take, 4, ok(0, time.Second)},
		{"reset forgets every bucket", 3 * time.Second, engine.Reset, 0, ok(4, 0)},
	})
}

// With Precision unset a BucketedWindow has 10 buckets of P/10.
func TestBucketedWindowDefaultPrecision(t *testing.T) {
	const ms = time.Millisecond
	l := core.PerSecond(4).WithAlgorithm(core.BucketedWindow) // p = 100ms
	runTable(t, l, []row{
		{"a request at 50ms counts in bucket 0 until 1s", 50 * ms, engine.Take, 2, ok(2, 950*ms)},
		{"one at 150ms counts in bucket 1 until 1.1s", 150 * ms, engine.Take, 2, ok(0, 950*ms)},
		{"bucket 0 expires at 1s", 999 * ms, engine.Take, 2, denied(0, 101*ms, 1*ms)},
		{"then 2 pass", time.Second, engine.Take, 2, ok(0, time.Second)},
	})
}

// With Precision = Period a BucketedWindow is a FixedWindow.
func TestBucketedWindowOfOneBucketIsFixedWindow(t *testing.T) {
	const ms = time.Millisecond
	bucketed := core.PerSecond(3).WithAlgorithm(core.BucketedWindow).WithPrecision(time.Second)
	fixed := core.PerSecond(3).WithAlgorithm(core.FixedWindow)
	bs, fs := make([]engine.State, 1), make([]engine.State, 1)
	for i, step := range []struct {
		at   time.Duration
		cost int64
	}{{0, 1}, {100 * ms, 2}, {900 * ms, 1}, {999 * ms, 0}, {1000 * ms, 3}, {1500 * ms, 1}, {2200 * ms, 2}, {2300 * ms, 2}, {5 * time.Second, 4}} {
		b := mustStep(t, bucketed, engine.Take, at(step.at), step.cost, bs)
		f := mustStep(t, fixed, engine.Take, at(step.at), step.cost, fs)
		if resultOf(b) != resultOf(f) {
			t.Errorf("step %d: AllowN(t0+%v, %d) = %v on the bucketed window, %v on the fixed window", i, step.at, step.cost, resultOf(b), resultOf(f))
		}
	}
}
