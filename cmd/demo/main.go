// Command demo pushes a burst of weighted requests from two clients through
// two limits on the in-memory store and prints each decision.
//
//	go run ./cmd/demo
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// stepClock is a clock the demo moves by hand, so the output is the same on
// every run.
type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time { return c.t }

func main() {
	clock := &stepClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()

	// 10 units per second and 20 per minute, both at once: a request passes
	// only if both admit its cost, and only passing requests are counted.
	lim, err := core.New(store,
		core.PerSecond(10).Named("per-second"),
		core.PerMinute(20).Named("per-minute"),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	fmt.Println("limits: 10 units/second and 20 units/minute per client, sliding window")
	fmt.Printf("%-8s %-7s %4s  %-7s %-10s %9s %11s\n", "time", "client", "cost", "result", "binding", "remaining", "retry-after")
	script := []struct {
		after  time.Duration
		client string
		cost   int64
	}{
		{0, "alice", 1}, {0, "alice", 1}, {0, "alice", 5}, {0, "alice", 5}, // 5 more would make 12 > 10/s
		{0, "bob", 3}, {100 * time.Millisecond, "alice", 3},
		{900 * time.Millisecond, "alice", 5}, {0, "alice", 5}, // the second window opens
		{0, "alice", 25}, // more than any limit can ever hold
		{time.Second, "alice", 1}, {0, "alice", 1}, {0, "bob", 10},
	}
	start := clock.t
	for _, s := range script {
		clock.t = clock.t.Add(s.after)
		d, err := lim.AllowN(ctx, s.client, s.cost)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		result, retry := "allowed", "-"
		if !d.Allowed {
			result, retry = "DENIED", d.RetryAfter.String()
			if d.RetryAfter == core.Never {
				retry = "never"
			}
		}
		fmt.Printf("%-8s %-7s %4d  %-7s %-10s %9d %11s\n", "+"+clock.t.Sub(start).String(), s.client, s.cost, result, d.Limit.Name, d.Remaining, retry)
	}
	// Post-hoc cost: admit at an estimate, settle when the real cost is known.
	d, _ := lim.AllowN(ctx, "carol", 4)
	fmt.Printf("\ncarol admitted at an estimate of 4: remaining %d (%s)\n", d.Remaining, d.Limit.Name)
	d, _ = lim.Refund(ctx, "carol", 3)
	fmt.Printf("the request cost 1 after all, refund 3: remaining %d (%s)\n", d.Remaining, d.Limit.Name)
	d, _ = lim.Charge(ctx, "carol", 15)
	fmt.Printf("a later one overran by 15, charge it: remaining %d, within limits: %v, retry after %v\n", d.Remaining, d.Allowed, d.RetryAfter)
}
