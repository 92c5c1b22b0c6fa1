package engine_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// FixedWindow: count + c ≤ Q within the epoch-aligned window [k·P, (k+1)·P).
// RetryAfter and ResetAfter are both the time to the window's end.
func TestFixedWindowSteps(t *testing.T) {
	const ms = time.Millisecond
	l := core.PerSecond(5).WithAlgorithm(core.FixedWindow) // Q=5, P=1s
	runTable(t, l, []row{
		{"the first request opens the window [t0, t0+1s)", 0, engine.Take, 1, ok(4, time.Second)},
		{"a weighted request of cost 3 counts 3", 200 * ms, engine.Take, 3, ok(1, 800*ms)}, // count 4
		// 4+2 = 6 > 5: wait for the window to end at t0+1s.
		{"a cost of 2 over the one remaining is denied until the window ends", 500 * ms, engine.Take, 2, denied(1, 500*ms, 500*ms)},
		{"the denied request took nothing: a peek of 1 passes", 500 * ms, engine.Peek, 1, ok(1, 500*ms)},
		{"the peek took nothing: a take of 1 passes", 500 * ms, engine.Take, 1, ok(0, 500*ms)}, // count 5
		{"a peek of cost 0 at exactly the quota is allowed", 500 * ms, engine.Peek, 0, ok(0, 500*ms)},
		{"one microsecond before the window ends the wait is 1µs", time.Second - time.Microsecond, engine.Take, 1, denied(0, time.Microsecond, time.Microsecond)},
		{"the next epoch-aligned window starts with a full quota", time.Second, engine.Take, 5, ok(0, time.Second)},
		{"a cost above the quota is denied for ever", 1250 * ms, engine.Take, 6, denied(0, 750*ms, core.Never)},
		// 5+3 = 8 > 5 after the charge: over the quota until the window ends.
		{"a post-hoc charge goes over the quota", 1250 * ms, engine.Charge, 3, denied(0, 750*ms, 750*ms)},
		{"a peek of 0 is denied while usage exceeds the quota", 1500 * ms, engine.Peek, 0, denied(0, 500*ms, 500*ms)},
		{"a refund of 2 leaves usage 6, still over", 1500 * ms, engine.Refund, 2, denied(0, 500*ms, 500*ms)},
		{"a refund larger than the usage stops at zero usage", 1500 * ms, engine.Refund, 10, ok(5, 0)},
		{"after the refund the whole quota is there", 1500 * ms, engine.Take, 2, ok(3, 500*ms)},
		{"reset replenishes the window", 1500 * ms, engine.Reset, 0, ok(5, 0)},
		{"a request at 0.7s into a window resets 0.3s later", 2700 * ms, engine.Take, 1, ok(4, 300*ms)},
		{"the window allows its full quota at its end", 2999 * ms, engine.Take, 4, ok(0, 1*ms)},
		{"and the next one again at its start: 2·Q across a boundary", 3000 * ms, engine.Take, 5, ok(0, time.Second)},
		{"cost 0 is allowed at exactly the quota", 3000 * ms, engine.Take, 0, ok(0, time.Second)},
	})
}

// The windows are aligned to the Unix epoch, not to a key's first request:
// every instance of a fleet agrees on them.
func TestFixedWindowIsAlignedToTheEpoch(t *testing.T) {
	tests := []struct {
		name  string
		limit core.Limit
		at    time.Duration
		reset time.Duration
	}{
		{"a minute window opened 42s into the minute resets 18s later", core.PerMinute(100), 42 * time.Second, 18 * time.Second},
		{"an hour window opened at 59m59s resets 1s later", core.PerHour(100), time.Hour - time.Second, time.Second},
		// 90s windows: t0 is 1_700_006_400 s = 18_888_960·90 s, a boundary.
		{"a 90s window opened 100s after a boundary resets 80s later", core.Per(100, 90*time.Second), 100 * time.Second, 80 * time.Second},
		// 7s windows: 1_700_006_400 mod 7 = 1, so boundaries fall at t0−1s+7k s.
		{"a 7s window opened at t0 resets 6s later", core.Per(100, 7*time.Second), 0, 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.limit.WithAlgorithm(core.FixedWindow)
			d := mustStep(t, l, engine.Take, at(tt.at), 1, make([]engine.State, 1))
			if got, want := resultOf(d), ok(99, tt.reset); got != want {
				t.Errorf("AllowN(t0+%v, 1) = %v, want %v", tt.at, got, want)
			}
		})
	}
}
