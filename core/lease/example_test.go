package lease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease"
	"github.com/tollgate/tollgate/core/memstore"
)

// A Limiter on a leased store: after its first requests, a key's Takes are
// decided in process from a slice reserved on the shared store (here a
// memstore standing in for Redis), and its Remaining stays exact for a lone
// instance.
func Example() {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := &stepClock{t: start}
	shared := memstore.New()
	store, err := lease.New(shared)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	lim, err := core.New(store, core.PerMinute(1000).WithAlgorithm(core.FixedWindow), core.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var d core.Decision
	for range 100 {
		clock.t = clock.t.Add(time.Millisecond)
		d, _ = lim.Allow(ctx, "tenant-42")
	}
	s := store.Stats()
	fmt.Println("allowed:", d.Allowed, "remaining:", d.Remaining)
	fmt.Println("decided in process:", s.Local > 90)
	// Output:
	// allowed: true remaining: 900
	// decided in process: true
}

// stepClock is a clock moved by hand.
type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time { return c.t }
