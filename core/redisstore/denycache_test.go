package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
)

// scriptCalls returns how many scripts the server has run, from its own
// INFO commandstats (EVALSHA and EVAL).
func scriptCalls(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	var n int64
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		n += v
	}
	return n
}

// abuse calls lim.Allow for key from goroutines until stop is closed, and
// returns the number of calls. With every > 0, each goroutine offers 10
// calls per every at most (an open loop, catching up after slow calls),
// as requests from a network would arrive; with 0, as fast as it can.
func abuse(lim *core.Limiter, key string, goroutines int, every time.Duration, stop chan struct{}) func() int64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if every > 0 {
					next = next.Add(every)
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
				}
				for range 10 {
					lim.Allow(context.Background(), key)
				}
				n.Add(10)
			}
		}()
	}
	return func() int64 { wg.Wait(); return n.Load() }
}

// A key hammered at full speed costs Redis about one script per retry
// interval with the deny cache, counted by Redis itself; without it, one
// per request.
func TestDenyCacheCutsRoundTrips(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	s := newStore(t, c)
	const quota = 10 // per second: a retry interval of 100ms
	for _, cached := range []bool{false, true} {
		opts := []core.Option{core.PerSecond(quota).WithAlgorithm(core.GCRA), core.WithName(fmt.Sprint("deny-", cached))}
		if cached {
			opts = append(opts, core.WithDenyCache(core.DenyCache{}))
		}
		lim, err := core.New(s, opts...)
		if err != nil {
			t.Fatal(err)
		}
		before := scriptCalls(t, c)
		start := time.Now()
		stop := make(chan struct{})
		wait := abuse(lim, "abuser", 4, 0, stop)
		time.Sleep(time.Second)
		close(stop)
		attempts := wait()
		elapsed := time.Since(start)
		calls := scriptCalls(t, c) - before
		t.Logf("deny cache %t: %d requests in %v cost Redis %d scripts", cached, attempts, elapsed.Round(time.Millisecond), calls)
		if !cached {
			if calls < attempts*9/10 {
				t.Fatalf("without the cache, %d requests made %d scripts: the count is wrong", attempts, calls)
			}
			continue
		}
		// When a remembered denial runs out, one caller asks Redis and is
		// admitted (a unit came back), then the next is denied and
		// remembered until the next retry, while the others are answered
		// from the cache: two scripts per interval, one more now and then
		// (a caller past the cache before the denial landed). The burst
		// of the first second comes on top.
		intervals := int64(elapsed/(time.Second/quota)) + 1
		if bound := quota + 3*intervals; calls > bound {
			t.Fatalf("with the cache, %d requests in %d retry intervals made %d scripts, more than %d", attempts, intervals, calls, bound)
		}
		if attempts < 10*calls {
			t.Fatalf("with the cache, %d requests made %d scripts: the abuser was not fast enough to test anything", attempts, calls)
		}
	}
}

// BenchmarkDenyCache measures normal keys' decisions (ns/op) on their own
// and while one abusive key offers 40,000 requests per second (4
// goroutines, 10 each per millisecond), without and with the deny cache, and
// reports what the abuser costs Redis in scripts per second, counted by
// INFO commandstats. The abuser is paced, as a network client would be:
// one spinning in-process at full speed would measure a fight for this
// machine's cores, not for Redis.
func BenchmarkDenyCache(b *testing.B) {
	c := newClient(b)
	s := newStore(b, c)
	for _, tc := range []struct {
		name           string
		abuser, cached bool
	}{{"alone", false, false}, {"abuser", true, false}, {"abuser+cache", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			abuserOpts := []core.Option{core.PerSecond(10).WithAlgorithm(core.GCRA), core.WithName("bench-abuser-" + tc.name)}
			if tc.cached {
				abuserOpts = append(abuserOpts, core.WithDenyCache(core.DenyCache{}))
			}
			abuser, err := core.New(s, abuserOpts...)
			if err != nil {
				b.Fatal(err)
			}
			normal, err := core.New(s, core.PerSecond(1_000_000), core.WithName("bench-normal"))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			stop := make(chan struct{})
			wait := func() int64 { return 0 }
			if tc.abuser {
				wait = abuse(abuser, "abuser", 4, time.Millisecond, stop)
				time.Sleep(50 * time.Millisecond) // the abuser at full rate
			}
			before := scriptCalls(b, c)
			b.ResetTimer()
			start := time.Now()
			var errs int
			for i := 0; b.Loop(); i++ {
				if _, err := normal.Allow(ctx, strconv.Itoa(i%1000)); err != nil {
					errs++ // a timeout on a loaded machine: counted, not fatal
				}
			}
			b.StopTimer()
			elapsed := time.Since(start)
			calls := scriptCalls(b, c) - before - int64(b.N)
			close(stop)
			attempts := wait()
			b.ReportMetric(float64(calls)/elapsed.Seconds(), "abuser-scripts/s")
			b.ReportMetric(float64(attempts)/elapsed.Seconds(), "abuser-requests/s")
			b.ReportMetric(float64(errs), "errors")
		})
	}
}
