//go:build gubernator

package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/gubernator-io/gubernator/v2/cluster"

	"github.com/tollgate/tollgate/core"
)

// BenchmarkLeasesFleet runs one fleet test on leases and on gubernator v2
// (github.com/gubernator-io/gubernator/v2, 3 peers in process on loopback,
// GLOBAL behaviour): 4 instances × 16 callers on one key whose limit (2000
// per second) is half their demand, for fleetFor each; the same fleet at
// ten times the limit (flood) for floodFor; then 64 callers unpaced on one
// key whose limit never denies.
//
//   - leases: 4 lease.Stores, each over a Redis store with a client of
//     its own (TOLLGATE_REDIS_ADDR), a fixed window of 2000 per second.
//   - gubernator: instance i asks peer i mod 3, a TOKEN_BUCKET of 2000 per
//     1000 ms (gubernator's token bucket refills whole at the end of its
//     duration: a fixed window), Behavior GLOBAL (peers answer from a copy
//     of the owner's state, synced every GlobalSyncWait, 50 ms here as in
//     gubernator's own test cluster).
//
// Each reports the admissions in the whole fixed windows of a second
// inside the run, as a share of the limit (used-%: above 100 is
// over-admission), the worst window (max-window-%), the same of the flood
// (used-%-flood, max-window-%-flood), and the unpaced decisions per
// second (dps-64), each the median over the rounds. Windows are the
// callers' own clock, an admission counted in the window its call
// started and ended in.
//
//	go test -tags gubernator -run '^$' -bench LeasesFleet -benchtime 1x .
//
// It builds only with the tag: gubernator's dependencies would make every
// run of the test command compile them.
func BenchmarkLeasesFleet(b *testing.B) {
	addr, _ := redisSetup(b)
	// One cluster per process: the testing package calls the benchmark
	// more than once, and gubernator's cluster package keeps its peers in
	// package variables (its Stop can hang on a second cluster). The
	// peers end with the process.
	gubernatorOnce.Do(func() {
		gubernatorErr = cluster.StartWith([]guber.PeerInfo{
			{GRPCAddress: "127.0.0.1:0", HTTPAddress: "127.0.0.1:0"},
			{GRPCAddress: "127.0.0.1:0", HTTPAddress: "127.0.0.1:0"},
			{GRPCAddress: "127.0.0.1:0", HTTPAddress: "127.0.0.1:0"},
		})
	})
	if gubernatorErr != nil {
		b.Fatal(gubernatorErr)
	}
	const limit, instances, callers = 2000, 4, 16
	const fleetFor, floodFor = 3 * time.Second, 3 * time.Second

	tollgateFleet := func() []decide {
		return leasedFleet(b, addr, core.PerSecond(limit).WithAlgorithm(core.FixedWindow), instances)
	}
	gubernatorFleet := func(limit int64) []decide {
		name := benchPrefix("gu")
		var out []decide
		for i := range instances {
			c, err := guber.DialV1Server(cluster.PeerAt(i%3).GRPCAddress, nil)
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, func(ctx context.Context, key string) (bool, error) {
				ctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				resp, err := c.GetRateLimits(ctx, &guber.GetRateLimitsReq{Requests: []*guber.RateLimitReq{{
					Name: name, UniqueKey: key, Hits: 1, Limit: limit, Duration: 1000,
					Algorithm: guber.Algorithm_TOKEN_BUCKET, Behavior: guber.Behavior_GLOBAL,
				}}})
				if err != nil {
					return false, err
				}
				r := resp.Responses[0]
				if r.Error != "" {
					return false, fmt.Errorf("gubernator: %s", r.Error)
				}
				return r.Status == guber.Status_UNDER_LIMIT, nil
			})
		}
		return out
	}
	// paced runs the fleet at twice the limit, equal demands, and returns
	// the admissions per window and the errors.
	paced := func(fleet []decide) (map[int64]int, int64) {
		perWindow, _, errs := pace(fleet, []float64{0.25, 0.25, 0.25, 0.25}, limit, callers, fleetFor)
		return perWindow, errs
	}
	// unpaced returns the decisions per second of 64 callers.
	unpaced := func(fleet []decide) float64 {
		var n atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for i := range 64 {
			d := fleet[i%len(fleet)]
			wg.Go(func() {
				for time.Since(start) < time.Second {
					d(context.Background(), "unpaced")
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
	// flood runs the fleet at ten times the limit, equal demands: more
	// than gubernator decides per second here, so that its callers ask as
	// fast as they are answered. Where answers come from a copy of the
	// state that lags the owner's, this is where it over-admits. (Not
	// unpaced: 64 goroutines deciding in process without a pause would
	// starve the goroutines that read Redis's replies of the 2 cores, a
	// load no server's request goroutines make.)
	flood := func(fleet []decide) (map[int64]int, int64) {
		perWindow, _, errs := pace(fleet, []float64{1.25, 1.25, 1.25, 1.25}, limit, callers, floodFor)
		return perWindow, errs
	}
	fig := map[string][]float64{}
	add := func(name string, v float64) { fig[name] = append(fig[name], v) }
	// windows adds the use of the whole windows of perWindow and the
	// worst one, as shares of the limit.
	windows := func(suffix string, perWindow map[int64]int) {
		first, last := int64(1<<62), int64(0)
		for w := range perWindow {
			first, last = min(first, w), max(last, w)
		}
		var used, worst, n int
		for w := first + 1; w < last; w++ {
			used += perWindow[w]
			worst = max(worst, perWindow[w])
			n++
		}
		if n == 0 {
			b.Fatalf("%s: no whole window inside the run", suffix)
		}
		add("used-%-"+suffix, 100*float64(used)/float64(n*limit))
		add("max-window-%-"+suffix, 100*float64(worst)/float64(limit))
	}
	b.ResetTimer()
	for range b.N {
		for _, lib := range []struct {
			name  string
			fleet func() []decide
		}{{"lease", tollgateFleet}, {"gubernator", func() []decide { return gubernatorFleet(limit) }}} {
			perWindow, errs := paced(lib.fleet())
			windows(lib.name, perWindow)
			add("errors-"+lib.name, float64(errs))
			perWindow, errs = flood(lib.fleet())
			windows("flood-"+lib.name, perWindow)
			add("errors-flood-"+lib.name, float64(errs))
		}
		add("dps-64-lease", unpaced(tollgateFleetUnlimited(b, addr)))
		add("dps-64-gubernator", unpaced(gubernatorFleet(1e9)))
	}
	b.StopTimer()
	for name, v := range fig { // medians over the rounds
		slices.Sort(v)
		b.ReportMetric(v[len(v)/2], name)
	}
}

var (
	gubernatorOnce sync.Once
	gubernatorErr  error
)

// tollgateFleetUnlimited returns 4 leased instances on a limit that never
// denies, for the unpaced run.
func tollgateFleetUnlimited(b *testing.B, addr string) []decide {
	return leasedFleet(b, addr, core.Per(1e9, time.Second).WithAlgorithm(core.FixedWindow), 4)
}
