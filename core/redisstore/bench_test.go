package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// BenchmarkScript measures the server's time per script call (server-µs/op:
// EVALSHA usec over calls, from INFO commandstats), in pipelines of 100 Takes
// over 1000 existing keys, every one allowed and written:
//
//   - floor: a script of the same three commands as a decision (TIME, GET,
//     SET with PX) and nothing else, the least any such script costs;
//   - generic and specialized: the script for limits of any layout, and
//     its copy specialized to the limits (fastpath.go), for one GCRA limit,
//     for three limits (GCRA, sliding window, fixed window), as bench/
//     measures them, and for one wide GCRA limit (1e9 per hour,
//     engine.Limit.Wide);
//   - specialized/…/receipt: the same, as a call sent inline sends it, with
//     a deadline and its lane and number: each Take leaves a receipt in its
//     key (inline.go).
//
// Pipelined, the server's time is the script's, not the round trips'. Run
// it with a server of its own (it calls CONFIG RESETSTAT):
//
//	TOLLGATE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench Script -count 8 .
func BenchmarkScript(b *testing.B) {
	c := newClient(b)
	ctx := context.Background()
	one := []core.Limit{core.Per(1e6, time.Second).WithAlgorithm(core.GCRA)}
	// Not wide (1e6 × 1 minute is within 2^47µs; a FixedWindow never is),
	// as bench/'s three limits.
	three := []core.Limit{one[0], core.Per(1e6, time.Minute), core.Per(1e12, time.Hour).WithAlgorithm(core.FixedWindow)}
	wide := []core.Limit{core.Per(1e9, time.Hour).WithAlgorithm(core.GCRA)} // engine.Limit.Wide: counted in spans
	floor := newScript(`redis.call('TIME')
local v = redis.call('GET', KEYS[1]) or ''
redis.call('SET', KEYS[1], string.rep('x', 32), 'PX', 60000)
return v`)
	for _, tc := range []struct {
		name    string
		limits  []core.Limit
		scripts int  // the store's maxScripts
		receipt bool // as sent inline: with a deadline, leaving a receipt
	}{
		{"floor", nil, 0, false},
		{"generic/limits=1", one, 0, false},
		{"specialized/limits=1", one, maxScripts, false},
		{"specialized/limits=1/receipt", one, maxScripts, true},
		{"generic/limits=1/wide", wide, 0, false},
		{"specialized/limits=1/wide", wide, maxScripts, false},
		{"generic/limits=3", three, 0, false},
		{"specialized/limits=3", three, maxScripts, false},
		{"specialized/limits=3/receipt", three, maxScripts, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := newStore(b, c, WithBatching(0, 0))
			s.maxScripts = tc.scripts
			send := func(p redis.Pipeliner, i int) {
				key := "k" + strconv.Itoa(i%1000)
				if tc.limits == nil {
					p.EvalSha(ctx, floor.sha, []string{s.prefix + key})
					return
				}
				sc, keys, args := s.command(&engine.Op{Plan: planOf("", tc.limits...), Kind: engine.Take, Key: key, Cost: 1})
				if tc.receipt { // a deadline an hour away (the server shares this clock), lane 1
					a := args[0].(*opArgs)
					a.deadline, a.lane, a.seq = time.Now().Add(time.Hour).UnixMicro(), 1, int64(i+1)
				}
				p.EvalSha(ctx, sc.sha, keys, args...)
			}
			run := func(from, n int) {
				for i := from; i < from+n; i += 100 {
					p := c.Pipeline()
					for j := i; j < min(i+100, from+n); j++ {
						send(p, j)
					}
					if _, err := p.Exec(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if tc.limits == nil {
				if err := c.ScriptLoad(ctx, floor.src).Err(); err != nil {
					b.Fatal(err)
				}
			} else {
				sc, _, _ := s.command(&engine.Op{Plan: planOf("", tc.limits...), Kind: engine.Take, Key: "k", Cost: 1})
				if err := c.ScriptLoad(ctx, sc.src).Err(); err != nil {
					b.Fatal(err)
				}
			}
			run(0, 1000) // the keys exist: measure decisions on them
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			run(0, b.N)
			b.StopTimer()
			b.ReportMetric(evalshaUsecPerCall(b, c), "server-µs/op")
		})
	}
}

// BenchmarkRelease measures the server's time per operation on a key of
// one Concurrency limit with inflight units held (server-µs/op, EVALSHA
// usec over calls, from INFO commandstats): a release, of the newest
// lease (newest), of the oldest (oldest), or of one in the middle
// (middle), each followed by an acquisition that keeps inflight units
// held; an op is the two. Run it with a server of its own (it calls
// CONFIG RESETSTAT):
//
//	TOLLGATE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench Release -benchtime 400x -count 5 .
func BenchmarkRelease(b *testing.B) {
	c := newClient(b)
	ctx := context.Background()
	for _, inflight := range []int{100, 10_000} {
		for _, which := range []string{"newest", "middle", "oldest"} {
			b.Run(fmt.Sprintf("inflight=%d/%s", inflight, which), func(b *testing.B) {
				lim, err := core.New(newStore(b, c), core.InFlight(int64(inflight)+1, time.Hour))
				if err != nil {
					b.Fatal(err)
				}
				leases := make([]int64, 0, inflight)
				acquire := func() {
					d, err := lim.Allow(ctx, "k")
					if err != nil || !d.Allowed {
						b.Fatalf("acquire: %v, allowed %v", err, d.Allowed)
					}
					leases = append(leases, d.Lease)
				}
				for range inflight {
					acquire()
				}
				if err := c.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					i := map[string]int{"newest": len(leases) - 1, "middle": len(leases) / 2, "oldest": 0}[which]
					if _, err := lim.Release(ctx, "k", leases[i]); err != nil {
						b.Fatal(err)
					}
					leases = slices.Delete(leases, i, i+1)
					acquire()
				}
				b.StopTimer()
				b.ReportMetric(2*evalshaUsecPerCall(b, c), "server-µs/op") // two calls an op
			})
		}
	}
}

// evalshaUsecPerCall returns EVALSHA's usec_per_call from INFO commandstats.
func evalshaUsecPerCall(tb testing.TB, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for kv := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec_per_call="); ok {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						tb.Fatalf("INFO commandstats line %q: %v", line, err)
					}
					return f
				}
			}
		}
	}
	tb.Fatal("INFO commandstats has no evalsha")
	return 0
}

// BenchmarkWait measures what WithWait costs: decisions per second on a
// master with one replica (both on loopback, started by the benchmark), 1
// and 64 concurrent callers, with asynchronous replication (the default)
// and with WithWait(1, 50ms), which ends each pipeline with WAIT 1:
//
//	go test -run '^$' -bench Wait -count 6 .
func BenchmarkWait(b *testing.B) {
	master := startNode(b, freeAddr(b), "--repl-diskless-sync-delay", "0")
	host, port, _ := strings.Cut(master.addr, ":")
	startNode(b, freeAddr(b), "--replicaof", host, port)
	c := redis.NewClient(&redis.Options{Addr: master.addr, ContextTimeoutEnabled: true})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if n, _ := c.Do(context.Background(), "WAIT", 1, 100).Int64(); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the replica did not connect within 10s")
		}
	}
	for _, tc := range []struct {
		name string
		opts []Option
	}{{"async", nil}, {"wait=1", []Option{WithWait(1, 50*time.Millisecond)}}} {
		for _, callers := range []int{1, 64} {
			b.Run(tc.name+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
				s := newStore(b, c, tc.opts...)
				lim, err := core.New(s, core.Per(1e8, time.Second).WithAlgorithm(core.GCRA), core.WithTimeout(time.Second)) // not wide: the common path
				if err != nil {
					b.Fatal(err)
				}
				b.SetParallelism(max(callers/2, 1)) // × GOMAXPROCS (2 here)
				var n atomic.Int64
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					key := "k" + strconv.FormatInt(n.Add(1), 10)
					for pb.Next() {
						if _, err := lim.Allow(context.Background(), key); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}

// BenchmarkLoneCaller splits a lone caller's time per decision (the median,
// p50-<part>, in µs) into its parts, in turn in one process, one block of
// 50 calls each, so that the load of a shared machine falls on each alike:
//
//   - ping: one PING, the least a round trip costs;
//   - evalsha: the Take's script for one GCRA limit (specialized), sent
//     with go-redis's EvalSha, with no store code around it;
//   - pipe1: the same in a pipeline of one, as the store sends it;
//   - apply: Store.Apply of the Take, sent inline;
//   - limiter: core.Limiter.Allow over the store, its default options.
//
// Each call but the Limiter's has a 100 ms timeout, as the Limiter gives.
//
//	TOLLGATE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench LoneCaller -benchtime 40x -count 5 .
func BenchmarkLoneCaller(b *testing.B) {
	c := newClient(b)
	one := core.Per(1e6, time.Second).WithAlgorithm(core.GCRA)
	plan := planOf("", one)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	s := newStore(b, c)
	lim, err := core.New(s, one)
	if err != nil {
		b.Fatal(err)
	}
	take := func(k string) (*script, []string, []any) {
		return s.command(&engine.Op{Plan: plan, Kind: engine.Take, Key: k, Cost: 1})
	}
	// evalsha and pipe1 come before the store's first Apply, which loads
	// the script, and a test may have flushed the server's scripts.
	if sc, _, _ := take("k"); true {
		if err := c.ScriptLoad(context.Background(), sc.src).Err(); err != nil {
			b.Fatalf("SCRIPT LOAD: %v", err)
		}
	}
	parts := []struct {
		name string
		f    func(ctx context.Context, k string) error
	}{
		{"ping", func(ctx context.Context, _ string) error { return c.Ping(ctx).Err() }},
		{"evalsha", func(ctx context.Context, k string) error {
			sc, keys, args := take(k)
			return c.EvalSha(ctx, sc.sha, keys, args...).Err()
		}},
		{"pipe1", func(ctx context.Context, k string) error {
			sc, keys, args := take(k)
			p := c.Pipeline()
			cmd := p.EvalSha(ctx, sc.sha, keys, args...)
			_, _ = p.Exec(ctx)
			return cmd.Err()
		}},
		{"apply", func(ctx context.Context, k string) error {
			_, err := s.Apply(ctx, engine.Op{Plan: plan, Kind: engine.Take, Key: k, Cost: 1})
			return err
		}},
		{"limiter", func(_ context.Context, k string) error {
			_, err := lim.Allow(context.Background(), k)
			return err
		}},
	}
	call := func(f func(context.Context, string) error, k string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		return f(ctx, k)
	}
	for _, p := range parts { // the keys exist, the script is loaded
		for _, k := range keys {
			if err := call(p.f, k); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
		}
	}
	lat := make([][]time.Duration, len(parts))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for n, p := range parts {
			for j := range 50 {
				start := time.Now()
				if err := call(p.f, keys[(i*50+j)%len(keys)]); err != nil {
					b.Fatalf("%s: %v", p.name, err)
				}
				lat[n] = append(lat[n], time.Since(start))
			}
		}
	}
	b.StopTimer()
	for n, p := range parts {
		slices.Sort(lat[n])
		b.ReportMetric(float64(lat[n][len(lat[n])/2])/1e3, "p50-"+p.name)
	}
}
