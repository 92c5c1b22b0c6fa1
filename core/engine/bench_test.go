package engine_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// BenchmarkStep measures the engine alone, without a store or a clock: one
// Take of one limit of each algorithm, allowed.
func BenchmarkStep(b *testing.B) {
	for _, alg := range core.Algorithms() {
		b.Run(alg.String(), func(b *testing.B) {
			l := core.PerSecond(100_000_000).WithAlgorithm(alg)
			switch alg {
			case core.SlidingLog:
				l = core.PerSecond(core.MaxLogQuota)
			case core.Concurrency: // its most units in flight (the cap of a log); taken one by one, then denied
				l = core.InFlight(core.MaxLogQuota, time.Minute)
			}
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
