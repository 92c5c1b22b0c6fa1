package engine_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// BenchmarkStep measures the engine alone, without a store or a clock: one
// Take of one limit of each algorithm, allowed, at 1e8 per second; and
// for the algorithms that can be wide (engine.Limit.Wide), the same on
// wide limits: 1e8 per second as 3.6e11 per hour, and 1e9 per hour.
func BenchmarkStep(b *testing.B) {
	type bench struct {
		name string
		l    core.Limit
	}
	var cases []bench
	for _, alg := range core.Algorithms() {
		l := core.PerSecond(100_000_000).WithAlgorithm(alg)
		switch alg {
		case core.SlidingLog:
			l = core.PerSecond(core.MaxLogQuota)
		case core.Concurrency: // its most units in flight (the cap of a log); taken one by one, then denied
			l = core.InFlight(core.MaxLogQuota, time.Minute)
		}
		cases = append(cases, bench{alg.String(), l})
	}
	for _, alg := range []core.Algorithm{core.SlidingWindow, core.TokenBucket, core.GCRA, core.LeakyBucket} {
		// The small limit's rate over an hour (a bucket as full, on the
		// same traffic), and 1e9 per hour (in debt: 3.6µs a unit).
		cases = append(cases, bench{"wide/" + alg.String(), core.PerHour(360_000_000_000).WithAlgorithm(alg)},
			bench{"wide-1e9h/" + alg.String(), core.PerHour(1_000_000_000).WithAlgorithm(alg)})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			l := c.l
			o := op{Key: "k", Limits: []core.Limit{l}, Cost: 1}
			e, err := o.engineOp()
			if err != nil {
				b.Fatal(err)
			}
			states := make([]engine.State, 1)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
			var res engine.Result
			b.ReportAllocs()
			for b.Loop() {
				now++
				if _, err := engine.Step(&e, now, states, &res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
