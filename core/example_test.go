package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// Requests cost what they cost: an expensive endpoint takes more of the
// quota than a cheap one.
func ExampleLimiter_AllowN() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := core.ClockFunc(func() time.Time { return now })

	store := memstore.New(memstore.WithClock(clock)) // a fixed clock, for the example
	defer store.Close()
	lim, err := core.New(store, core.PerMinute(100))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, cost := range []int64{25, 25, 40, 25, 10, 101} {
		d, err := lim.AllowN(ctx, "alice", cost)
		switch {
		case err != nil:
			panic(err)
		case d.Allowed:
			fmt.Printf("cost %d: allowed, %d left\n", cost, d.Remaining)
		case d.RetryAfter == core.Never:
			fmt.Printf("cost %d: denied, more than the quota can ever pass\n", cost)
		default:
			fmt.Printf("cost %d: denied, retry after %v\n", cost, d.RetryAfter)
		}
	}
	// Output:
	// cost 25: allowed, 75 left
	// cost 25: allowed, 50 left
	// cost 40: allowed, 10 left
	// cost 25: denied, retry after 1m10s
	// cost 10: allowed, 0 left
	// cost 101: denied, more than the quota can ever pass
}

// Several limits apply at once: a request passes only when every one
// admits it, and the Decision names the binding limit and carries every
// limit's state.
func Example_multiLimit() {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	now := start
	clock := core.ClockFunc(func() time.Time { return now })

	store := memstore.New(memstore.WithClock(clock)) // a fixed clock, for the example
	defer store.Close()
	lim, err := core.New(store, core.PerSecond(2), core.PerMinute(5))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, at := range []time.Duration{0, 0, 0, 2 * time.Second, 2 * time.Second, 4 * time.Second, 6 * time.Second} {
		now = start.Add(at)
		d, err := lim.Allow(ctx, "alice")
		if err != nil {
			panic(err)
		}
		var left []string
		d.Each(func(s core.LimitState) { left = append(left, fmt.Sprintf("%s=%d", s.Limit.Name, s.Remaining)) })
		if d.Allowed {
			fmt.Printf("%v: allowed, binding %s, remaining %v\n", at, d.Limit.Name, left)
		} else {
			fmt.Printf("%v: denied by %s, retry after %v, remaining %v\n", at, d.Limit.Name, d.RetryAfter, left)
		}
	}
	// Output:
	// 0s: allowed, binding 2-per-1s, remaining [2-per-1s=1 5-per-1m=4]
	// 0s: allowed, binding 2-per-1s, remaining [2-per-1s=0 5-per-1m=3]
	// 0s: denied by 2-per-1s, retry after 1.5s, remaining [2-per-1s=0 5-per-1m=3]
	// 2s: allowed, binding 2-per-1s, remaining [2-per-1s=1 5-per-1m=2]
	// 2s: allowed, binding 2-per-1s, remaining [2-per-1s=0 5-per-1m=1]
	// 4s: allowed, binding 5-per-1m, remaining [2-per-1s=1 5-per-1m=0]
	// 6s: denied by 5-per-1m, retry after 1m6s, remaining [2-per-1s=2 5-per-1m=0]
}

// A loop that decides over and over and keeps no Decision past the next
// can bring the memory of its States: on several limits, AllowNInto then
// allocates nothing, where Allow allocates the States each time.
func ExampleLimiter_AllowNInto() {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := core.ClockFunc(func() time.Time { return start })
	store := memstore.New(memstore.WithClock(clock)) // a fixed clock, for the example
	defer store.Close()
	lim, err := core.New(store, core.PerSecond(2), core.PerMinute(5))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var d core.Decision
	buf := make([]core.LimitState, 0, 4) // room for up to 4 limits
	for range 3 {
		d.States = buf[:0]
		if err := lim.AllowNInto(ctx, "alice", 1, &d); err != nil {
			panic(err)
		}
		fmt.Printf("allowed %t: %s=%d %s=%d\n", d.Allowed,
			d.States[0].Limit.Name, d.States[0].Remaining, d.States[1].Limit.Name, d.States[1].Remaining)
	}
	// Output:
	// allowed true: 2-per-1s=1 5-per-1m=4
	// allowed true: 2-per-1s=0 5-per-1m=3
	// allowed false: 2-per-1s=0 5-per-1m=3
}

// A cost known only after the request ran (tokens generated, bytes sent)
// is settled afterwards: admit at an estimate, then Charge the overage or
// Refund what was not used. A charge may push usage over the quota, and
// later requests wait until it has been paid back.
func ExampleLimiter_Charge() {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	now := start
	clock := core.ClockFunc(func() time.Time { return now })

	store := memstore.New(memstore.WithClock(clock)) // a fixed clock, for the example
	defer store.Close()
	// 1000 tokens a minute, refilled continuously.
	lim, err := core.New(store, core.PerMinute(1000).WithAlgorithm(core.TokenBucket))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	report := func(what string, d core.Decision, err error) {
		if err != nil {
			panic(err)
		}
		if d.Allowed {
			fmt.Printf("%s: %d left\n", what, d.Remaining)
		} else {
			fmt.Printf("%s: over the quota, retry after %v\n", what, d.RetryAfter)
		}
	}

	d, err := lim.AllowN(ctx, "alice", 200) // the estimate
	report("admit at 200", d, err)
	d, err = lim.Charge(ctx, "alice", 350) // it used 550
	report("charge 350 more", d, err)
	d, err = lim.AllowN(ctx, "alice", 200)
	report("admit at 200", d, err)
	d, err = lim.Refund(ctx, "alice", 200) // it failed: give it all back
	report("refund 200", d, err)
	d, err = lim.Charge(ctx, "alice", 600) // a long answer: 150 over
	report("charge 600", d, err)
	d, err = lim.Peek(ctx, "alice")
	report("peek", d, err)
	now = start.Add(12 * time.Second) // 200 tokens later
	d, err = lim.AllowN(ctx, "alice", 50)
	report("12s later, admit at 50", d, err)
	// Output:
	// admit at 200: 800 left
	// charge 350 more: 450 left
	// admit at 200: 250 left
	// refund 200: 450 left
	// charge 600: over the quota, retry after 9s
	// peek: over the quota, retry after 9s
	// 12s later, admit at 50: 0 left
}

// Limits can depend on the key: here on the plan encoded in it.
func ExampleWithLimitsFunc() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := core.ClockFunc(func() time.Time { return now })

	free := []core.Limit{core.PerMinute(3).Named("free")}
	pro := []core.Limit{core.PerMinute(100).Named("pro")}
	plans := func(ctx context.Context, key string) []core.Limit {
		if strings.HasPrefix(key, "pro:") {
			return pro
		}
		return free
	}

	store := memstore.New(memstore.WithClock(clock)) // a fixed clock, for the example
	defer store.Close()
	lim, err := core.New(store, core.WithLimitsFunc(plans))
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"free:alice", "pro:bob"} {
		allowed := 0
		var d core.Decision
		for range 4 {
			if d, err = lim.Allow(context.Background(), key); err != nil {
				panic(err)
			}
			if d.Allowed {
				allowed++
			}
		}
		fmt.Printf("%s: %d of 4 allowed under %q, %d left", key, allowed, d.Limit.Name, d.Remaining)
		if !d.Allowed {
			fmt.Printf(", retry after %v", d.RetryAfter)
		}
		fmt.Println()
	}
	// Output:
	// free:alice: 3 of 4 allowed under "free", 0 left, retry after 1m20s
	// pro:bob: 4 of 4 allowed under "pro", 96 left
}

// The algorithms differ in how long a client waits once it has used its
// quota up: the windows until the oldest request has left, the buckets
// until one request's worth has refilled. A leaky bucket queues requests
// instead of letting them through at once.
func ExampleAlgorithm() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := core.ClockFunc(func() time.Time { return now })

	store := memstore.New(memstore.WithClock(clock)) // a fixed clock, for the example
	defer store.Close()
	for _, alg := range core.Algorithms() {
		lim, err := core.New(store, core.PerSecond(4).WithAlgorithm(alg))
		if err != nil {
			panic(err)
		}
		var delays []time.Duration
		var d core.Decision
		for range 5 {
			if d, err = lim.Allow(context.Background(), alg.String()); err != nil {
				panic(err)
			}
			if d.Allowed {
				delays = append(delays, d.Delay)
			}
		}
		fmt.Printf("%s: %d allowed", alg, len(delays))
		if alg == core.LeakyBucket {
			fmt.Printf(" (served after %v)", delays)
		}
		fmt.Printf(", the fifth retries after %v\n", d.RetryAfter)
	}
	// Output:
	// sliding-window: 4 allowed, the fifth retries after 1.25s
	// fixed-window: 4 allowed, the fifth retries after 1s
	// sliding-log: 4 allowed, the fifth retries after 1s
	// bucketed-window: 4 allowed, the fifth retries after 1s
	// token-bucket: 4 allowed, the fifth retries after 250ms
	// gcra: 4 allowed, the fifth retries after 250ms
	// leaky-bucket: 4 allowed (served after [0s 250ms 500ms 750ms]), the fifth retries after 250ms
	// concurrency: 4 allowed, the fifth retries after 1s
}

func ExampleLimit_PolicyName() {
	fmt.Println(core.PerMinute(100).PolicyName())
	fmt.Println(core.Per(3, 90*time.Second).PolicyName())
	fmt.Println(core.PerDay(5000).Named("daily").PolicyName())
	// Output:
	// 100-per-1m
	// 3-per-90s
	// daily
}

func ExampleLimit_Validate() {
	for _, l := range []core.Limit{
		core.PerSecond(10),
		core.PerSecond(0),
		core.PerSecond(10).WithAlgorithm(core.BucketedWindow).WithPrecision(300 * time.Millisecond),
		core.PerMinute(10).Named("naïve"),
	} {
		err := l.Validate()
		fmt.Println(errors.Is(err, core.ErrInvalidLimit), err)
	}
	// Output:
	// false <nil>
	// true tollgate: invalid limit {Quota: 0, Period: 1s}: quota 0 must be at least 1
	// true tollgate: invalid limit {Quota: 10, Period: 1s}: precision 300ms does not divide period 1s into whole microsecond buckets
	// true tollgate: invalid limit {Quota: 10, Period: 1m0s}: name "naïve" is not printable ASCII
}

// A Concurrency limit bounds the requests in flight, here 2 per user on
// top of 10 per second: Release ends an acquisition when the work is
// done, and a holder that never releases loses its place when its lease
// runs out.
func ExampleLimiter_Release() {
	store := memstore.New()
	defer store.Close()
	lim, err := core.New(store, core.PerSecond(10), core.InFlight(2, 30*time.Second))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var leases []int64
	for i := range 3 {
		d, err := lim.Allow(ctx, "alice")
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: allowed %t by %s, %d more may start\n", i+1, d.Allowed, d.Limit.PolicyName(), d.Remaining)
		if d.Allowed {
			leases = append(leases, d.Lease)
		}
	}
	if _, err := lim.Release(ctx, "alice", leases[0]); err != nil { // the first request is done
		panic(err)
	}
	d, err := lim.Allow(ctx, "alice")
	if err != nil {
		panic(err)
	}
	fmt.Printf("after a release: allowed %t\n", d.Allowed)
	// Output:
	// request 1: allowed true by 2-in-flight, 1 more may start
	// request 2: allowed true by 2-in-flight, 0 more may start
	// request 3: allowed false by 2-in-flight, 0 more may start
	// after a release: allowed true
}

// A limit whose cost is not requests says what it counts: the unit is sent
// as qu in RateLimit-Policy, and is part of the limit's default name.
func ExampleLimit_WithUnit() {
	l := core.PerMinute(10_000).WithUnit("tokens")
	fmt.Println(l.PolicyName(), l.Validate())
	fmt.Println(errors.Is(core.PerMinute(1).WithUnit("content bytes").Validate(), core.ErrInvalidLimit))
	// Output:
	// 10000-tokens-per-1m <nil>
	// true
}
