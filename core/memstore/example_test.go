package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// fixedClock is a clock that stands still, so the example's output is the
// same on every run.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// A bounded in-memory store shared by two limiters: each keeps its own
// state for the same client.
func Example() {
	clock := fixedClock{time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC)}
	store := memstore.New(memstore.WithMaxKeys(100_000), memstore.WithClock(clock))
	defer store.Close()

	app, _ := core.New(store, core.PerMinute(100))
	search, _ := core.New(store, core.PerMinute(20).Named("search"))
	ctx := context.Background()

	app.Allow(ctx, "203.0.113.7")
	d, _ := search.AllowN(ctx, "203.0.113.7", 5)
	fmt.Println("search:", d.Allowed, d.Remaining, d.Limit.Name)
	d, _ = app.Peek(ctx, "203.0.113.7")
	fmt.Println("app:", d.Remaining, d.Limit.Name)
	fmt.Println("keys:", store.Len())
	// Output:
	// search: true 15 search
	// app: 99 100-per-1m
	// keys: 2
}

// A flood of distinct keys, each sent one request, keeps the store at its
// bound and evicts its own keys: it does not give an exhausted client its
// quota back.
func ExampleWithMaxKeys() {
	clock := fixedClock{time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC)}
	store := memstore.New(memstore.WithMaxKeys(1000), memstore.WithClock(clock))
	defer store.Close()
	lim, _ := core.New(store, core.PerMinute(3))
	ctx := context.Background()

	for range 3 {
		lim.Allow(ctx, "203.0.113.7")
	}
	for i := range 10_000 {
		lim.Allow(ctx, fmt.Sprintf("flood-%d", i))
	}
	d, _ := lim.Allow(ctx, "203.0.113.7")
	fmt.Println("exhausted client allowed:", d.Allowed)
	fmt.Println("keys within the bound:", store.Len() <= 1000)
	fmt.Println("evictions forgot usage:", store.LossyEvictions() > 0)
	// Output:
	// exhausted client allowed: false
	// keys within the bound: true
	// evictions forgot usage: true
}
