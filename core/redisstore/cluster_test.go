package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
)

// TestCluster decides on a 3-master Redis Cluster for many keys, with
// several limits (and so several Redis keys, logs included, a Concurrency
// limit's acquired and released) per decision,
// keys with braces among them: no CROSSSLOT error, the keys spread over
// every master, and every decision equals memstore's.
func TestCluster(t *testing.T) {
	c := newClusterClient(t)
	for _, batched := range []bool{false, true} {
		name, opts := "unbatched", []Option{WithBatching(0, 0)}
		if batched {
			name, opts = "batched", []Option{WithBatching(64, 4)}
		}
		t.Run(name, func(t *testing.T) {
			s := newStore(t, c, opts...)
			ms := memstore.New(memstore.WithSweepInterval(0))
			defer ms.Close()
			// Keys of odd rank take limits without logs: a specialized
			// script, which each master loads on its first NOSCRIPT.
			withLogs := []core.Limit{
				core.PerSecond(5).WithAlgorithm(core.GCRA),
				core.PerMinute(8).WithAlgorithm(core.SlidingLog),
				core.PerMinute(12).WithAlgorithm(core.BucketedWindow).WithPrecision(10 * time.Second),
				core.InFlight(4, time.Minute),
			}
			noLogs := []core.Limit{core.PerSecond(5).WithAlgorithm(core.TokenBucket), core.PerMinute(8), core.PerHour(12).WithAlgorithm(core.FixedWindow)}
			keys := make([]string, 240)
			for i := range keys {
				keys[i] = []string{"user-%d", "{a}%d", "}%d{", "{%d}", "a{b}c%d", strings.Repeat("x", 300) + "%d"}[i%6]
				keys[i] = fmt.Sprintf(keys[i], i)
			}
			now := time.Unix(1_800_000_000, 0)
			var wg sync.WaitGroup
			var failed atomic.Bool
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < len(keys); i += 8 {
						limits := withLogs
						if i%2 == 1 {
							limits = noLogs
						}
						var lease int64 // of the first Take, released by the fifth op
						for j := range 6 {
							op := engine.Op{Plan: planOf("", limits...), Key: keys[i], Cost: 1, Now: (now.Add(time.Duration(j) * 100 * time.Millisecond)).UnixMicro()}
							switch {
							case j == 4 && lease != 0:
								op.Kind, op.Cost, op.Lease = engine.Release, 0, lease
							case j == 5:
								op.Kind = engine.Refund
							}
							got, err := s.Apply(context.Background(), op)
							want, _ := ms.Apply(context.Background(), op) // one goroutine per key: same order
							if err != nil {
								if !failed.Swap(true) {
									t.Errorf("Apply(%q) on the cluster: %v", keys[i], err)
								}
								return
							}
							if !reflect.DeepEqual(got, want) {
								if !failed.Swap(true) {
									t.Errorf("Apply(%q) op %d on the cluster = %+v, memstore %+v", keys[i], j, got, want)
								}
								return
							}
							if j == 0 {
								lease = got.Lease
							}
						}
					}
				}()
			}
			wg.Wait()
			var perNode []int
			var pmu sync.Mutex
			err := c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
				n := len(scan(t, m, s.prefix))
				pmu.Lock()
				perNode = append(perNode, n)
				pmu.Unlock()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(perNode) != 3 {
				t.Fatalf("cluster has %d masters, want 3", len(perNode))
			}
			for _, n := range perNode {
				if n == 0 {
					t.Errorf("keys per master %v: one master holds none", perNode)
				}
			}
		})
	}
}

// A caller's own short deadline, which ends a call sent inline on a
// healthy Cluster, is no sign of a failing master: it starts no topology
// reloads (which a master that stops answering does, see failover_test.go).
func TestCallersTimeoutsStartNoTopologyReload(t *testing.T) {
	c := newClusterClient(t)
	obs := &eventLog{}
	s := newStore(t, c, WithObserver(obs))
	lim, err := core.New(s, core.PerSecond(1_000_000), core.WithTimeout(150*time.Microsecond),
		core.WithFailurePolicy(core.FailOpen), core.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	// The store learns the servers' clock first, which inline calls need.
	warm, err := core.New(s, core.PerSecond(1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := warm.Allow(context.Background(), fmt.Sprint("user-", i)); err != nil {
			t.Fatal(err)
		}
	}
	timeouts := 0
	for i := 0; i < 5000 && timeouts < 50; i++ {
		d, err := lim.Allow(context.Background(), fmt.Sprint("user-", i%100))
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		if d.Source == core.FromFailOpen {
			timeouts++
		}
	}
	if timeouts == 0 {
		t.Fatal("no call outlived 150µs: the test tested nothing")
	}
	if reloads, _ := obs.count(core.EventTopologyReload); len(reloads) != 0 {
		t.Errorf("%d callers' timeouts started %d topology reloads on a healthy cluster, want none", timeouts, len(reloads))
	}
}
