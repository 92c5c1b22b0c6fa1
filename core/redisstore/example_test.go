package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/redisstore"
)

// A Limiter on Redis shared by a fleet, falling back to a local memstore
// while Redis is down. (This example needs a Redis server, so it is only
// compiled; the package tests run the same calls against a real one.)
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379",
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	store, err := redisstore.New(rdb, redisstore.WithPrefix("myapp:rl:"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	fallback := memstore.New()
	defer fallback.Close()
	lim, err := core.New(store,
		core.PerMinute(100), core.PerHour(1000).WithAlgorithm(core.GCRA),
		core.WithTimeout(100*time.Millisecond),                             // the default
		core.WithFailurePolicy(core.Fallback(fallback, core.FleetSize(4))), // 4 instances share the quota
		core.WithErrorHook(func(ctx context.Context, key string, err error) { log.Printf("rate limiter: %v", err) }),
	)
	if err != nil {
		log.Fatal(err)
	}
	d, err := lim.Allow(context.Background(), "client-42")
	if err != nil {
		log.Fatal(err) // invalid input, or ErrUnavailable when the fallback fails too
	}
	fmt.Println(d.Allowed, d.Remaining)
}

// On Redis Cluster, every key of a decision shares a hash tag, so any
// number of limits per key runs in one slot.
func ExampleNew_cluster() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		ContextTimeoutEnabled: true,
	})
	store, err := redisstore.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	lim, err := core.New(store, core.PerSecond(10).WithAlgorithm(core.GCRA).WithBurst(20))
	if err != nil {
		log.Fatal(err)
	}
	if d, err := lim.AllowN(context.Background(), "user:{odd key}", 3); err == nil && !d.Allowed {
		fmt.Println("retry after", d.RetryAfter)
	}
}
