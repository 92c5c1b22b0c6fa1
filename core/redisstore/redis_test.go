package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/storetest"
)

// The test command (scripts/test.sh) starts Redis and exports:
//
//	TOLLGATE_REDIS_ADDR               host:port of a single redis-server
//	TOLLGATE_REDIS_CLUSTER_ADDRS      comma-separated masters of a 3-master cluster
//	TOLLGATE_REDIS_PID_FILE           pid file of the single redis-server
//	TOLLGATE_REDIS_CLUSTER_PID_FILES  comma-separated pid files of the masters, in
//	                                  the order of TOLLGATE_REDIS_CLUSTER_ADDRS
//	TOLLGATE_REQUIRE_REDIS=1          fail, never skip, when one is missing
//
// Tests skip only when the variable they need is unset and
// TOLLGATE_REQUIRE_REDIS is not 1.

// env returns the variable name, or skips (or fails, when Redis is
// required) when it is unset.
func env(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("TOLLGATE_REQUIRE_REDIS") == "1" {
			t.Fatalf("%s is not set and TOLLGATE_REQUIRE_REDIS=1", name)
		}
		t.Skipf("%s is not set: start Redis (see scripts/test.sh)", name)
	}
	return v
}

// clientOptions are the options the package doc recommends.
func clientOptions(addr string) *redis.Options {
	return &redis.Options{Addr: addr, ContextTimeoutEnabled: true, PoolSize: 128}
}

// newClient returns a client of the single Redis, closed at the end of t.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(clientOptions(env(t, "TOLLGATE_REDIS_ADDR")))
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING %s: %v", c.Options().Addr, err)
	}
	return c
}

// newClusterClient returns a client of the Redis Cluster, closed at the
// end of t.
func newClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	addrs := strings.Split(env(t, "TOLLGATE_REDIS_CLUSTER_ADDRS"), ",")
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() }); err != nil {
		t.Fatalf("PING cluster %v: %v", addrs, err)
	}
	return c
}

// testPrefix returns a key prefix no other test (or run) uses.
func testPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "tgtest:" + hex.EncodeToString(b[:]) + ":"
}

// newStore returns a store of c with a fresh prefix, closed at the end of
// t, when its keys are deleted too (traces on a fake clock leave keys whose
// TTLs run for the fake periods, up to 400 days).
func newStore(t testing.TB, c Client, opts ...Option) *Store {
	t.Helper()
	s, err := New(c, append([]Option{WithPrefix(testPrefix())}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		deleteKeys(c, s.prefix)
	})
	return s
}

// deleteKeys deletes the keys starting with prefix, on every master of a
// cluster.
func deleteKeys(c Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	del := func(r redis.Cmdable) error {
		iter := r.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			r.Unlink(ctx, iter.Val())
		}
		return iter.Err()
	}
	switch r := c.(type) {
	case *redis.ClusterClient:
		r.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return del(m) })
	case *redis.Client:
		del(r)
	}
}

// clearOfWindowEnd returns once at least margin is left of the current
// epoch-aligned window of period by the clock of the server of c: when
// less is left, it waits for the next window to begin. A test that
// compares a key's numbers across decisions made at Redis TIME runs in
// one window so, if it takes less than margin: a window that ends in
// between starts the key afresh (a CI run failed so, commit d41fb40).
func clearOfWindowEnd(t testing.TB, c redis.Cmdable, period, margin time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	p := period.Microseconds()
	if left := time.Duration(p-now.UnixMicro()%p) * time.Microsecond; left < margin {
		time.Sleep(left + 50*time.Millisecond)
	}
}

// plans caches the plans of planOf, so that operations on the same limits
// share one plan, as a Limiter's do.
var plans sync.Map

// planOf returns the plan of limits in scope, as a core.Limiter prepares
// it (storetest.Plan), the same for equal arguments.
func planOf(scope string, limits ...core.Limit) *engine.Plan {
	k := fmt.Sprintf("%q %#v", scope, limits)
	if p, ok := plans.Load(k); ok {
		return p.(*engine.Plan)
	}
	p, _ := plans.LoadOrStore(k, storetest.Plan(scope, limits...))
	return p.(*engine.Plan)
}
