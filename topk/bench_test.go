package topk_test

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/topk"
)

// distinctKeys returns n keys and fails the benchmark unless they are
// pairwise distinct.
func distinctKeys(b *testing.B, n int, prefix string) []string {
	b.Helper()
	keys := make([]string, n)
	seen := make(map[string]struct{}, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
		seen[keys[i]] = struct{}{}
	}
	if len(seen) != n {
		b.Fatalf("%d keys but only %d distinct", n, len(seen))
	}
	return keys
}

// BenchmarkDenied measures the hot path: one denial counted.
func BenchmarkDenied(b *testing.B) {
	cases := []struct {
		name string
		keys []string
	}{
		// Known keys: each has a counter (1000 keys, 1024 counters).
		{"known/1-key", distinctKeys(b, 1, "user-")},
		{"known/1000-keys", distinctKeys(b, 1000, "user-")},
		{"known/long-key", distinctKeys(b, 1, strings.Repeat("k", 1000))},
		// A flood: almost every denial takes a counter from another key.
		{"flood/100000-keys", distinctKeys(b, 100_000, "flood-")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			tr := newTracker(b, topk.WithCapacity(topk.DefaultCapacity))
			for _, k := range c.keys {
				tr.Denied(k, 1)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tr.Denied(c.keys[i%len(c.keys)], 1)
				i++
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			tr := newTracker(b, topk.WithCapacity(topk.DefaultCapacity))
			for _, k := range c.keys {
				tr.Denied(k, 1)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(7919))
				for pb.Next() {
					tr.Denied(c.keys[i%len(c.keys)], 1)
					i++
				}
			})
		})
	}
}

func BenchmarkSnapshot(b *testing.B) {
	tr := newTracker(b)
	for _, k := range distinctKeys(b, 5000, "user-") {
		tr.Denied(k, 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		tr.Snapshot(10)
	}
}
