package bench

import (
	"context"
	"runtime"
	"testing"
)

// BenchmarkFootprint measures the memory each library keeps per key: the
// live heap after 100,000 distinct keys (BenchmarkMemory's parallel100k
// set: IPv4 addresses, 10 to 13 bytes) each took one decision, less the
// heap before, per key, after a full collection each time. The keys'
// strings are the benchmark's own, made before: a library that keeps the
// caller's string instead of a copy is not charged for it. Over many keys
// a decision's time is mostly its cache misses, and the footprint is what
// they miss in.
//
//	go test -run '^$' -bench Footprint -benchtime 1x
func BenchmarkFootprint(b *testing.B) {
	keys := distinctKeys(b, 100_000)
	for _, lib := range libraries() {
		b.Run("lib="+lib.name, func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				perKey = heapPerKey(b, lib, keys)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

// heapPerKey returns the heap lib keeps per key once each of keys took a
// decision.
func heapPerKey(b *testing.B, lib library, keys []string) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := lib.new(b, allowAll)
	ctx := context.Background()
	for _, k := range keys {
		if ok, err := d.allow(ctx, k); err != nil || !ok {
			b.Fatalf("%s: allow(%q) = %v, %v; want allowed", lib.name, k, ok, err)
		}
	}
	if n, ok := d.(counter); ok && n.entries() != len(keys) {
		b.Fatalf("%s holds %d keys, want %d", lib.name, n.entries(), len(keys))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(d)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(keys))
}
