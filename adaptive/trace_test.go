package adaptive_test

import (
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adaptive"
)

// The model of every trace: 10 slots, a median service time of 20 ms
// (mean 22.9 ms, p99 68 ms unloaded), so a capacity of about 436
// requests per second.
const (
	slots    = 10
	median   = 20 * time.Millisecond
	capacity = 436.0 // requests per second
	warmup   = 10 * time.Second
)

// unloadedP99 is the p99 latency of the model at no load: the service
// time's, 3.37 × its median.
const unloadedP99 = 67 * time.Millisecond

func newLimiter(t *testing.T, clock *virtualClock, opts ...adaptive.Option) *adaptive.Limiter {
	t.Helper()
	lim, err := adaptive.New(append([]adaptive.Option{adaptive.WithClock(clock),
		adaptive.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// overloadAfterWarmup returns a rate: half capacity during the warm-up,
// then x times capacity.
func overloadAfterWarmup(x float64) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		if t < warmup {
			return capacity / 2
		}
		return x * capacity
	}
}

func p99(samples []time.Duration) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	return s[len(s)*99/100]
}

func TestOverloadKeepsGoodputAndLatency(t *testing.T) {
	for _, alg := range []adaptive.Algorithm{adaptive.Gradient{}, adaptive.AIMD{}} {
		t.Run(algName(alg), func(t *testing.T) {
			clock := newClock()
			lim := newLimiter(t, clock, adaptive.WithAlgorithm(alg))
			const d = 30 * time.Second
			s := &server{Slots: constant(slots), Rate: overloadAfterWarmup(10), Median: median, Seed: 1, From: warmup}
			s.run(lim, clock, warmup+d)
			goodput := float64(s.served[0]) / d.Seconds()
			if goodput < 0.9*capacity {
				t.Errorf("goodput %.0f/s, want at least 90%% of %.0f/s", goodput, capacity)
			}
			if got := p99(s.samples); got > 2*unloadedP99 {
				t.Errorf("p99 of admitted requests %v, want at most 2 × %v", got, unloadedP99)
			}
			t.Logf("goodput %.0f/s (%.1f%%), p99 %v, limit %.1f", goodput, 100*goodput/capacity, p99(s.samples), s.meanLimit(warmup, warmup+d))
		})
	}
}

func algName(a adaptive.Algorithm) string {
	switch a.(type) {
	case adaptive.Gradient:
		return "gradient"
	case adaptive.AIMD:
		return "aimd"
	}
	return "other"
}

// Under light load the limit sheds (almost) nothing, and does not climb
// without end for want of pressure (concurrency-limits #134's light-load
// half): it grows only while binding.
func TestLightLoadShedsNothing(t *testing.T) {
	clock := newClock()
	lim := newLimiter(t, clock)
	s := &server{Slots: constant(slots), Rate: constant(capacity / 2), Median: median, Seed: 2}
	s.run(lim, clock, 120*time.Second)
	shed := float64(s.shed[0]) / float64(s.arrived[0])
	if shed > 0.001 {
		t.Errorf("shed %.3f%% of %d requests at half capacity, want at most 0.1%%", 100*shed, s.arrived[0])
	}
	if l := s.meanLimit(60*time.Second, 120*time.Second); l > 6*slots {
		t.Errorf("limit %.1f after a minute at half capacity, want it bounded (at most %d)", l, 6*slots)
	}
	t.Logf("shed %.3f%%, limit %.1f then %.1f", 100*shed, s.meanLimit(0, 60*time.Second), s.meanLimit(60*time.Second, 120*time.Second))
}

// Under sustained overload the no-load estimate does not ratchet upward
// (envoy #11579, Vegas's drift in concurrency-limits #165), so the limit
// of the third minute is the limit of the first.
func TestBaselineDoesNotRatchetUnderSustainedLoad(t *testing.T) {
	for _, x := range []float64{1.2, 10} {
		t.Run(ratio(x), func(t *testing.T) {
			clock := newClock()
			lim := newLimiter(t, clock)
			s := &server{Slots: constant(slots), Rate: overloadAfterWarmup(x), Median: median, Seed: 3}
			s.run(lim, clock, warmup+3*time.Minute)
			first, last := s.meanLimit(warmup, warmup+time.Minute), s.meanLimit(warmup+2*time.Minute, warmup+3*time.Minute)
			if last > 1.1*first || last > 2.5*slots || last < slots {
				t.Errorf("limit %.1f in the first minute of overload, %.1f in the third; want it steady, within [%d, %d]", first, last, slots, 5*slots/2)
			}
			mean := time.Duration(float64(median) * 1.146)
			if b := lim.Stats().Baseline; b > mean*5/4 || b < mean*3/5 {
				t.Errorf("no-load latency estimate %v after 3 minutes of overload, want near the service's mean %v", b, mean)
			}
			t.Logf("limit %.1f then %.1f, baseline %v", first, last, lim.Stats().Baseline)
		})
	}
}

func ratio(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) + "x" }

// Requests that all time out (their clients give up before the service
// answers) are no samples: the limit does not climb to its ceiling on
// them (concurrency-limits #137).
func TestSteadyTimeoutsDoNotRaiseTheLimit(t *testing.T) {
	clock := newClock()
	lim := newLimiter(t, clock)
	s := &server{Slots: constant(slots), Rate: constant(3 * capacity), Median: median, Seed: 4,
		GiveUp: median / 4, GiveUpShare: 1}
	s.run(lim, clock, time.Minute)
	if got := lim.Stats().Limit; got > adaptive.DefaultInitialLimit {
		t.Errorf("limit %d after a minute of timeouts, want at most the initial %d", got, adaptive.DefaultInitialLimit)
	}
}

// Clients that disconnect early leave the limit where it would have been
// without them (within 10%).
func TestDisconnectsLeaveTheLimit(t *testing.T) {
	run := func(share float64) float64 {
		clock := newClock()
		lim := newLimiter(t, clock)
		s := &server{Slots: constant(slots), Rate: overloadAfterWarmup(10), Median: median, Seed: 5,
			GiveUp: 50 * time.Millisecond, GiveUpShare: share}
		s.run(lim, clock, warmup+time.Minute)
		return s.meanLimit(warmup+5*time.Second, warmup+time.Minute)
	}
	without, with := run(0), run(0.2)
	if with > 1.1*without || with < 0.9*without {
		t.Errorf("limit %.1f with 20%% of clients giving up after 50ms, %.1f without: want within 10%%", with, without)
	}
	t.Logf("limit %.2f with, %.2f without (%+.1f%%)", with, without, 100*(with/without-1))
}

// When capacity halves the limit follows within 5 s, and when it comes
// back the limit recovers within 10 s, without a phase that pins
// concurrency low (envoy #8337).
func TestLimitFollowsCapacity(t *testing.T) {
	clock := newClock()
	lim := newLimiter(t, clock)
	half, back, end := warmup+30*time.Second, warmup+60*time.Second, warmup+90*time.Second
	s := &server{Rate: overloadAfterWarmup(10), Median: median, Seed: 6,
		Slots: func(t time.Duration) int {
			if t >= half && t < back {
				return slots / 2
			}
			return slots
		}}
	s.run(lim, clock, end)
	full := s.meanLimit(half-20*time.Second, half)
	low := s.meanLimit(back-20*time.Second, back)
	if low > 0.65*full {
		t.Fatalf("limit %.1f at full capacity, %.1f at half: want it to follow", full, low)
	}
	follow := s.reached(half, back, func(l float64) bool { return l <= 1.2*low })
	if follow < 0 || follow-half > 5*time.Second {
		t.Errorf("limit came within 20%% of %.1f %v after capacity halved, want within 5s", low, follow-half)
	}
	recover := s.reached(back, end, func(l float64) bool { return l >= 0.8*full })
	if recover < 0 || recover-back > 10*time.Second {
		t.Errorf("limit came within 20%% of %.1f %v after capacity returned, want within 10s", full, recover-back)
	}
	t.Logf("limit %.1f → %.1f; followed in %v, recovered in %v", full, low, follow-half, recover-back)
}

// At 3× overload, with critical traffic at 0.6× capacity, critical
// requests are served (at least 99%); the sheddable ones are refused
// first.
func TestPrioritiesProtectCritical(t *testing.T) {
	clock := newClock()
	lim := newLimiter(t, clock)
	s := &server{Slots: constant(slots), Rate: overloadAfterWarmup(3), Median: median, Seed: 7,
		Priorities: true, CriticalShare: 0.2, From: warmup} // 0.2 × 3 = 0.6 of capacity
	s.run(lim, clock, warmup+time.Minute)
	crit := float64(s.served[adaptive.Critical]) / float64(s.arrived[adaptive.Critical])
	if crit < 0.99 {
		t.Errorf("critical served %.2f%%, want at least 99%%", 100*crit)
	}
	goodput := float64(s.served[0]+s.served[1]) / time.Minute.Seconds()
	if goodput < 0.9*capacity {
		t.Errorf("goodput %.0f/s, want at least 90%% of %.0f/s", goodput, capacity)
	}
	t.Logf("critical served %.2f%%, sheddable %.1f%%, goodput %.1f%%", 100*crit,
		100*float64(s.served[1])/float64(s.arrived[1]), 100*goodput/capacity)
}

// After a long spell of light traffic (windows of a few samples, ended
// by the longest window), a sudden overload still finds the limit near
// capacity: the no-load estimate was not dragged down by lucky samples.
func TestOverloadAfterLightTraffic(t *testing.T) {
	clock := newClock()
	lim := newLimiter(t, clock)
	quiet := 2 * time.Minute
	s := &server{Slots: constant(slots), Median: median, Seed: 8, From: quiet + 5*time.Second,
		Rate: func(t time.Duration) float64 {
			if t < quiet {
				return 5 // a request every 200 ms
			}
			return 10 * capacity
		}}
	s.run(lim, clock, quiet+35*time.Second)
	goodput := float64(s.served[0]) / (30 * time.Second).Seconds()
	if goodput < 0.9*capacity {
		t.Errorf("goodput %.0f/s after light traffic, want at least 90%% of %.0f/s (limit %.1f)", goodput, capacity,
			s.meanLimit(quiet+5*time.Second, quiet+35*time.Second))
	}
	if got := p99(s.samples); got > 2*unloadedP99 {
		t.Errorf("p99 %v, want at most 2 × %v", got, unloadedP99)
	}
	t.Logf("goodput %.1f%%, p99 %v, limit %.1f", 100*goodput/capacity, p99(s.samples), s.meanLimit(quiet+5*time.Second, quiet+35*time.Second))
}
