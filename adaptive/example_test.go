package adaptive_test

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
)

// A Limiter on a fixed clock: two requests fill a limit of 2, the third
// is shed, and the end of the window (two samples of 20 ms) raises the
// binding limit.
func Example() {
	now := time.Unix(1_700_000_000, 0)
	lim, err := adaptive.New(
		adaptive.WithClock(core.ClockFunc(func() time.Time { return now })),
		adaptive.WithInitialLimit(2),
		adaptive.WithWindow(2, 1, time.Millisecond, time.Second),
	)
	if err != nil {
		panic(err)
	}
	a, _ := lim.Acquire(adaptive.Critical)
	b, _ := lim.Acquire(adaptive.Critical)
	_, ok := lim.Acquire(adaptive.Critical)
	fmt.Println("third admitted:", ok)

	now = now.Add(20 * time.Millisecond)
	lim.Release(a, adaptive.Served)
	lim.Release(b, adaptive.Served)
	s := lim.Stats()
	fmt.Println("limit:", s.Limit, "no-load latency:", s.Baseline, "shed:", s.Shed)
	// Output:
	// third admitted: false
	// limit: 3 no-load latency: 20ms shed: 1
}
