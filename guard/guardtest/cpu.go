package guardtest

import (
	"testing"
	"time"
)

// ReportCPU reports the CPU time the process used per iteration of b since
// start, a CPUTime taken before b's loop, as the metric "cpu-ns/op". On a
// machine shared with other work it is steadier than ns/op, which counts
// the time other processes hold the CPU; it counts the garbage collector's
// work for the loop's allocations, which ns/op may not. Call it once b's
// loop is over. It reports nothing where CPUTime is not known.
func ReportCPU(b *testing.B, start time.Duration) {
	b.Helper()
	if start == 0 || b.N == 0 {
		return
	}
	b.ReportMetric(float64(CPUTime()-start)/float64(b.N), "cpu-ns/op")
}
