package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease"
	"github.com/tollgate/tollgate/core/redisstore"
)

// BenchmarkLeases measures leases (core/lease) on a local redis-server
// (TOLLGATE_REDIS_ADDR) against the same store without them and against
// redis_rate, in one process, the cases taking turns so that load on a
// shared machine falls on all alike. An op is one round of every turn;
// each figure is the median over the rounds.
//
//   - hot: one key, 64 callers, for turnTime each: decisions per second
//     (dps-hot-<lib>), ×redis_rate of the leased store, and the Redis
//     commands per decision of the leased store (cmds/op-hot-lease, from
//     the server's INFO commandstats, the INFO calls themselves excluded:
//     reservations, renewals and give-backs). The limits never deny: a
//     GCRA of 1e9 per second for redis_rate and tollgate, a sliding window
//     (lease) and a GCRA (lease-gcra) of 1e9 per second leased.
//
//   - lone: one caller on one key: the median time per decision
//     (p50-µs-lone-<lib>) and the share of the leased store's decisions
//     that waited on a round trip (waits-%-lone, from lease.Stats).
//
//   - cold: 64 callers over 10,000 keys, each asked about once per turn
//     (a GCRA of 1e6 per second, per key): decisions per second with and
//     without leases, in four alternating turns of turnTime/4 each, and
//     the ratio of their sums (cold-lease×none, the median over rounds).
//
//     go test -run '^$' -bench Leases -benchtime 5x -count 1 .
func BenchmarkLeases(b *testing.B) {
	addr, _ := redisSetup(b)
	ctx := context.Background()
	newClient := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 128, ContextTimeoutEnabled: true})
		b.Cleanup(func() { rdb.Close() })
		return rdb
	}
	type runner struct {
		name   string
		decide func(context.Context, string) error
		stats  func() lease.Stats // leased stores
		rdb    *redis.Client
	}
	tollgate := func(name string, leased bool, l core.Limit) *runner {
		rdb := newClient()
		rs, err := redisstore.New(rdb, redisstore.WithPrefix(benchPrefix("lz")))
		if err != nil {
			b.Fatal(err)
		}
		var st core.Store = rs
		r := &runner{name: name, rdb: rdb}
		if leased {
			ls, err := lease.New(rs, lease.WithMaxKeys(20_000))
			if err != nil {
				b.Fatal(err)
			}
			st, r.stats = ls, ls.Stats
		}
		b.Cleanup(func() { st.Close() })
		lim, err := core.New(st, l)
		if err != nil {
			b.Fatal(err)
		}
		r.decide = func(ctx context.Context, key string) error {
			d, err := lim.Allow(ctx, key)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("%s denied %q: %+v", name, key, d)
			}
			return err
		}
		return r
	}
	redisRate := func(rate int) *runner {
		rdb := newClient()
		l := redis_rate.NewLimiter(rdb)
		limit := redis_rate.Limit{Rate: rate, Period: time.Second, Burst: rate}
		prefix := benchPrefix("lr")
		return &runner{name: "redis_rate", rdb: rdb, decide: func(ctx context.Context, key string) error {
			res, err := l.Allow(ctx, prefix+key, limit)
			if err == nil && res.Allowed == 0 {
				err = fmt.Errorf("redis_rate denied %q: %+v", key, res)
			}
			return err
		}}
	}
	huge := core.Per(1e9, time.Second)
	hot := []*runner{
		redisRate(1e9),
		tollgate("tollgate", false, huge.WithAlgorithm(core.GCRA)),
		tollgate("lease", true, huge),
		tollgate("lease-gcra", true, huge.WithAlgorithm(core.GCRA)),
	}
	coldLimit := core.Per(1e6, time.Second).WithAlgorithm(core.GCRA)
	cold := []*runner{tollgate("none", false, coldLimit), tollgate("lease", true, coldLimit)}
	coldKeys := make([]string, 10_000)
	for i := range coldKeys {
		coldKeys[i] = "cold-" + strconv.Itoa(i)
	}
	for _, r := range hot {
		if err := r.decide(ctx, "hot"); err != nil {
			b.Fatal(err)
		}
	}

	const callers, turnTime = 64, 300 * time.Millisecond
	var errs atomic.Int64
	errsOf := map[string]*atomic.Int64{}
	// parallel runs decide from 64 goroutines for turnTime over keys
	// and returns the decisions per second.
	parallel := func(r *runner, keys []string, turnTime time.Duration) float64 {
		var n, next atomic.Int64
		var e atomic.Int64
		defer func() {
			errs.Add(e.Load())
			if errsOf[r.name] == nil {
				errsOf[r.name] = new(atomic.Int64)
			}
			errsOf[r.name].Add(e.Load())
		}()
		var wg sync.WaitGroup
		start := time.Now()
		for range callers {
			wg.Go(func() {
				for time.Since(start) < turnTime {
					for range 64 {
						i := next.Add(1)
						if err := r.decide(ctx, keys[i%int64(len(keys))]); err != nil {
							e.Add(1)
						}
					}
					n.Add(64)
				}
			})
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
	fig := map[string][]float64{}
	add := func(name string, v float64) { fig[name] = append(fig[name], v) }
	hotKey := []string{"hot"}
	b.ResetTimer()
	for range b.N {
		for _, r := range hot {
			var calls int64
			if r.stats != nil {
				calls = commandCalls(b, r.rdb)
			}
			var decided int64
			if r.stats != nil {
				decided = r.stats().Local + r.stats().Waits
			}
			add("dps-hot-"+r.name, parallel(r, hotKey, turnTime))
			if r.stats != nil {
				cmds := commandCalls(b, r.rdb) - calls - 1
				add("cmds/op-hot-"+r.name, float64(cmds)/float64(r.stats().Local+r.stats().Waits-decided))
			}
		}
		for _, r := range hot {
			var before lease.Stats
			if r.stats != nil {
				before = r.stats()
			}
			lat := make([]time.Duration, 0, 1<<16)
			for start := time.Now(); time.Since(start) < turnTime/3; {
				t := time.Now()
				if err := r.decide(ctx, "hot"); err != nil {
					errs.Add(1)
				}
				lat = append(lat, time.Since(t))
			}
			slices.Sort(lat)
			add("p50-µs-lone-"+r.name, float64(lat[len(lat)/2])/1e3)
			if r.stats != nil {
				s := r.stats()
				add("waits-%-lone-"+r.name, 100*float64(s.Waits-before.Waits)/float64(len(lat)))
			}
		}
		// Cold keys: the two stores alternate in short turns, in ABBA
		// order, so that a change of load falls on both alike.
		var sum [2]float64
		for k := range 4 {
			for j := range cold {
				if k%2 == 1 {
					j = len(cold) - 1 - j
				}
				sum[j] += parallel(cold[j], coldKeys, turnTime/4)
			}
		}
		add("dps-cold-none", sum[0]/4)
		add("dps-cold-lease", sum[1]/4)
		add("cold-lease×none", sum[1]/sum[0])
	}
	b.StopTimer()
	med := map[string]float64{}
	names := make([]string, 0, len(fig))
	for name, v := range fig {
		slices.Sort(v)
		med[name] = v[len(v)/2]
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b.ReportMetric(med[name], name)
	}
	b.ReportMetric(med["dps-hot-lease"]/med["dps-hot-redis_rate"], "hot-lease×redis_rate")
	b.ReportMetric(med["dps-hot-lease-gcra"]/med["dps-hot-redis_rate"], "hot-lease-gcra×redis_rate")
	b.ReportMetric(float64(errs.Load()), "errors")
	for name, e := range errsOf {
		b.ReportMetric(float64(e.Load()), "errors-"+name)
	}
}
