package engine_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// SlidingWindow: with e the time elapsed in the current epoch-aligned window,
// cost c passes when prev·(P−e) + (cur+c)·P ≤ Q·P. Remaining is
// Q − cur − ⌈prev·(P−e)/P⌉; ResetAfter runs to the end of the window after
// the last one with a count.
func TestSlidingWindowSteps(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	l := core.PerSecond(10) // Q=10, P=1s = 1e6µs, the default algorithm
	runTable(t, l, []row{
		// cur=10; the count weighs until the end of the next window: t0+2s.
		{"the whole quota passes at once", 0, engine.Take, 10, ok(0, 2*time.Second)},
		// Not in this window (cur+c > Q). In the next, prev=10, cur=0:
		// 10·(1e6−e) ≤ (10−1)·1e6 ⇔ e ≥ 100000µs: at t0+1.1s.
		{"one more waits until the previous window weighs 9", 0, engine.Take, 1, denied(0, 2*time.Second, 1100*ms)},
		// prev=10, e=0.5s: 10·0.5e6 + 5·1e6 = 1e7 ≤ 1e7. Remaining 10−⌈5⌉.
		{"half-way into the next window a cost of 5 passes exactly", 1500 * ms, engine.Peek, 5, ok(5, 500*ms)},
		// 10·0.5e6 + 6·1e6 = 1.1e7 > 1e7. Passes when 10·(1e6−e) ≤ (10−6)·1e6,
		// e ≥ 600000µs: 100ms from now.
		{"a cost of 6 does not and waits 100ms", 1500 * ms, engine.Take, 6, denied(5, 500*ms, 100*ms)},
		// cur=5: 10 − 5 − ⌈5⌉ = 0; cur weighs until t0+3s.
		{"a cost of 5 passes", 1500 * ms, engine.Take, 5, ok(0, 1500*ms)},
		// e=0.75s: 10·0.25e6 + (5+1)·1e6 = 8.5e6 ≤ 1e7; Remaining 10−6−⌈2.5⌉ = 1.
		{"as the previous window slides out, room comes back", 1750 * ms, engine.Take, 1, ok(1, 1250*ms)},
		// 10·0.25e6 + (6+2)·1e6 = 1.05e7 > 1e7. 10·(1e6−e) ≤ (10−6−2)·1e6
		// ⇔ e ≥ 800000µs: 50ms from now.
		{"a cost of 2 waits until the previous window weighs 2", 1750 * ms, engine.Take, 2, denied(1, 1250*ms, 50*ms)},
		// e=0.8s: 10·0.2e6 + 8e6 = 1e7.
		{"and then passes exactly", 1800 * ms, engine.Take, 2, ok(0, 1200*ms)},
		// Window 2: prev=8, cur=0, e=0: Remaining 10−⌈8⌉ = 2; prev weighs
		// until t0+3s.
		{"at the next boundary the previous count weighs in full", 2 * time.Second, engine.Peek, 0, ok(2, time.Second)},
		// e=0.5s: 8·0.5e6 + 6e6 = 1e7. Remaining 10−6−⌈4⌉ = 0.
		{"a weighted cost of 6 passes half-way", 2500 * ms, engine.Take, 6, ok(0, 1500*ms)},
		// Window 4, more than one window after window 2: prev=cur=0.
		{"two windows later everything has slid out", 4200 * ms, engine.Take, 1, ok(9, 1800*ms)},
		{"a cost above the quota is denied for ever", 4200 * ms, engine.Take, 11, denied(9, 1800*ms, core.Never)},
		// cur=21 > Q. Next window: 21·(1e6−e) ≤ 10·1e6 ⇔ e ≥ 1e6 − ⌊1e7/21⌋
		// = 1e6 − 476190 = 523810µs: at t0+5.52381s.
		{"a post-hoc charge pushes usage over the quota", 4200 * ms, engine.Charge, 20, denied(0, 1800*ms, 1323810*us)},
		// Window 5, e=0.6s: prev=21 weighs 21·0.4 = 8.4 ≤ 10; Remaining 10−⌈8.4⌉.
		{"the overage slides out with the window", 5600 * ms, engine.Peek, 0, ok(1, 400*ms)},
		{"a refund comes out of the previous window when the current is empty", 5600 * ms, engine.Refund, 15, ok(7, 400*ms)}, // prev=6: 10−⌈2.4⌉
		{"a refund larger than the usage stops at zero usage", 5600 * ms, engine.Refund, 100, ok(10, 0)},
		{"the full quota is back", 5600 * ms, engine.Take, 10, ok(0, 1400*ms)}, // cur=10 weighs until t0+7s
		{"reset replenishes both windows", 5600 * ms, engine.Reset, 0, ok(10, 0)},
	})
}

// Q=10, P=1s, prev=10: the cost c that passes at elapsed time e is
// ⌊10 − 10·(1e6−e)/1e6⌋, and a larger one is told when it will.
func TestSlidingWindowWeighting(t *testing.T) {
	const us = time.Microsecond
	l := core.PerSecond(10)
	tests := []struct {
		name string
		e    time.Duration // into the window after the one holding 10
		cost int64
		want result
	}{
		{"at e=0 the previous window weighs in full", 0, 1, denied(0, time.Second, 100_000*us)}, // 10·(1e6−e) ≤ 9e6 ⇔ e ≥ 1e5
		{"at e=0 cost 0 passes", 0, 0, ok(0, time.Second)},
		{"at e=0.1s cost 1 passes exactly", 100_000 * us, 1, ok(0, 1900_000*us)}, // 10·0.9e6 + 1e6 = 1e7
		{"at e=0.1s cost 2 waits 100ms", 100_000 * us, 2, denied(1, 900_000*us, 100_000*us)},
		{"at e=0.25s cost 2 passes: 7.5 + 2 ≤ 10", 250_000 * us, 2, ok(0, 1750_000*us)},     // Remaining 10 − 2 − ⌈7.5⌉
		{"at e=0.25s cost 3 waits 50ms", 250_000 * us, 3, denied(2, 750_000*us, 50_000*us)}, // e ≥ 1e6 − ⌊7e6/10⌋ = 3e5
		{"at e=0.5s cost 5 passes exactly", 500_000 * us, 5, ok(0, 1500_000*us)},
		{"at e=0.5s cost 6 waits 100ms", 500_000 * us, 6, denied(5, 500_000*us, 100_000*us)}, // e ≥ 6e5
		// 10·(1e6−e) ≤ 3e6 ⇔ e ≥ 700000µs; 700000 − 333333 = 366667µs.
		{"at e=333333µs cost 7 waits 366667µs", 333_333 * us, 7, denied(3, 666_667*us, 366_667*us)}, // Remaining 10 − ⌈6.66667⌉
		// 10·(1e6−e) ≤ 0 ⇔ e ≥ 1e6: the window after.
		{"at e=0.999999s cost 10 waits 1µs for the next window", 999_999 * us, 10, denied(9, 1*us, 1*us)},
		{"at e=0.999999s cost 9 passes", 999_999 * us, 9, ok(0, 1000_001*us)},
		{"at e=1s the previous window has slid out", time.Second, 10, ok(0, 2*time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			states := make([]engine.State, 1)
			mustStep(t, l, engine.Take, at(0), 10, states)
			d := mustStep(t, l, engine.Take, at(time.Second+tt.e), tt.cost, states)
			if got := resultOf(d); got != tt.want {
				t.Errorf("AllowN(t0+1s+%v, %d) = %v, want %v", tt.e, tt.cost, got, tt.want)
			}
		})
	}
}
