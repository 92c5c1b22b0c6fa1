package engine_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// GCRA: emission interval T = P/Q, theoretical arrival time TAT; c passes
// when max(TAT, t) + c·T − B·T ≤ t, and then TAT = max(TAT, t) + c·T.
// Q=3, P=1s gives the fractional T = 333333⅓µs; B=2.
// Remaining = ⌊B − (TAT−t)/T⌋, ResetAfter = ⌈TAT − t⌉, RetryAfter =
// ⌈max(TAT,t) + c·T − B·T − t⌉.
func TestGCRASteps(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	l := core.PerSecond(3).WithBurst(2).WithAlgorithm(core.GCRA)
	runTable(t, l, []row{
		{"the first request sets TAT = t0 + 333333⅓µs", 0, engine.Take, 1, ok(1, 333_334*us)},
		{"the second sets TAT = t0 + 666666⅔µs", 0, engine.Take, 1, ok(0, 666_667*us)},
		// 666666⅔ + 333333⅓ − 666666⅔ = 333333⅓ > 0.
		{"the third waits ⌈333333⅓⌉µs", 0, engine.Take, 1, denied(0, 666_667*us, 333_334*us)},
		// TAT−t = 333333⅔µs: 2 − 1.000001 → Remaining 0, ResetAfter ⌈333333⅔⌉.
		{"at 333333µs it is ⅓µs short", 333_333 * us, engine.Take, 1, denied(0, 333_334*us, 1*us)},
		// 666666⅔ + 333333⅓ = 1e6 exactly.
		{"at 333334µs it passes and TAT = t0 + 1s", 333_334 * us, engine.Take, 1, ok(0, 666_666*us)},
		{"at TAT the bucket is full again and a burst of 2 passes", time.Second, engine.Take, 2, ok(0, 666_667*us)},
		{"a cost above the burst is denied for ever", time.Second, engine.Take, 3, denied(0, 666_667*us, core.Never)},
		{"cost 0 is allowed at exactly the burst", time.Second, engine.Peek, 0, ok(0, 666_667*us)},
		// TAT = 1s + 3·333333⅓ = 2s: 1s ahead, 333333⅓µs beyond the burst.
		{"a post-hoc charge pushes TAT beyond the burst", time.Second, engine.Charge, 1, denied(0, time.Second, 333_334*us)},
		// 2s + 333333⅓ − 666666⅔ − 1.5s = 166666⅔µs.
		{"half a second later a request waits 166667µs", 1500 * ms, engine.Take, 1, denied(0, 500*ms, 166_667*us)},
		{"a refund larger than the debt makes the bucket full", 1500 * ms, engine.Refund, 5, ok(2, 0)},
		{"reset makes it full too", 1500 * ms, engine.Reset, 0, ok(2, 0)},
	})
}

// LeakyBucket: GCRA's condition, but an admitted request is served after
// Delay = max(TAT−t, 0), so requests leave at exactly Q per P; the queue
// holds B·T. Q=2, P=1s: T = 500ms; B=3: a queue of 1.5s.
func TestLeakyBucketSteps(t *testing.T) {
	const ms = time.Millisecond
	l := core.PerSecond(2).WithBurst(3).WithAlgorithm(core.LeakyBucket)
	runTable(t, l, []row{
		{"the first request is served at once", 0, engine.Take, 1, queued(2, 500*ms, 0)},
		{"the second queues behind it for T", 0, engine.Take, 1, queued(1, time.Second, 500*ms)},
		{"the third for 2T", 0, engine.Take, 1, queued(0, 1500*ms, time.Second)},
		{"the queue is full: the fourth is denied until one slot drains", 0, engine.Take, 1, denied(0, 1500*ms, 500*ms)},
		// TAT−t = 1.25s; 1.25s + 0.5s − 1.5s = 0.25s.
		{"a quarter second later it waits the rest of the slot", 250 * ms, engine.Take, 1, denied(0, 1250*ms, 250*ms)},
		{"after one T it joins the queue, served at the old TAT", 500 * ms, engine.Take, 1, queued(0, 1500*ms, time.Second)},
		{"a peek of 0 reports the delay a request of cost 0 would have", 500 * ms, engine.Peek, 0, queued(0, 1500*ms, 1500*ms)},
		{"once the queue has drained a cost of 2 is served at once", 3 * time.Second, engine.Take, 2, queued(1, time.Second, 0)},
		{"the next waits the 2T the cost of 2 takes to leave", 3 * time.Second, engine.Take, 1, queued(0, 1500*ms, time.Second)},
		{"a cost above the queue's capacity is denied for ever", 3 * time.Second, engine.Take, 4, denied(0, 1500*ms, core.Never)},
		// TAT = t + 2s: 0.5s beyond the queue's 1.5s; a charge is not queued.
		{"a post-hoc charge overfills the queue", 3 * time.Second, engine.Charge, 1, denied(0, 2*time.Second, 500*ms)},
		{"a refund shortens the queue", 3 * time.Second, engine.Refund, 2, ok(1, time.Second)},
		{"a refund larger than the queue empties it", 3 * time.Second, engine.Refund, 9, ok(3, 0)},
	})
}
