package fastclock

import (
	"testing"
	"time"
)

var sink int64

// BenchmarkRead compares one read of each clock a store could take its
// time from: the process's Clock (the counter, once it counts), a Clock
// without a counter, time.Since (one vDSO clock_gettime) and time.Now
// (two: the wall and the monotonic clock).
//
//	go test -run '^$' -bench Read -count 5 ./internal/fastclock
func BenchmarkRead(b *testing.B) {
	shared := Shared()
	for deadline := time.Now().Add(time.Second); !shared.Counting() && shared.ticks != nil && time.Now().Before(deadline); {
		shared.Nanos()
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	b.Run("clock=shared", func(b *testing.B) {
		if shared.ticks != nil && !shared.Counting() {
			b.Fatal("the shared Clock does not count after a second")
		}
		for b.Loop() {
			sink += shared.Nanos()
		}
	})
	b.Run("clock=no-counter", func(b *testing.B) {
		c := newClock(nil, func() (int64, bool) { return int64(time.Since(start)), true })
		for b.Loop() {
			sink += c.Nanos()
		}
	})
	b.Run("clock=time.Since", func(b *testing.B) {
		for b.Loop() {
			sink += int64(time.Since(start))
		}
	})
	b.Run("clock=time.Now", func(b *testing.B) {
		for b.Loop() {
			sink += time.Now().UnixNano()
		}
	})
}
