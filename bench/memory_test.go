package bench

import (
	"context"
	"sync/atomic"
	"testing"
)

// BenchmarkMemory measures one in-memory decision on an existing key, for
// every library in one run, named case=…/lib=… so that
//
//	benchstat -col /lib
//
// puts the libraries of each case side by side. Keys are pre-warmed (one
// decision each) before timing starts, so the store's existing-key path is
// what is measured, and every run checks that its decisions all went the
// way the scenario says (all allowed, or all denied).
//
// Besides ns/op (wall time), each benchmark reports cpu-ns/op: the
// process's CPU time over the timed loop, per decision. On a shared machine
// wall time also counts the time other processes held the cores, and
// cpu-ns/op does not, so it is the steadier of the two there. Under
// RunParallel it adds up all goroutines, so it is about GOMAXPROCS times
// ns/op when the cores are free.
//
// Cases:
//   - hotkey: one key, repeated; every decision allowed.
//   - hotkey-denied: one key whose limit is exhausted; every decision denied.
//   - keys10k: 10,000 distinct keys in round robin; every decision allowed.
//   - parallel100k: b.RunParallel (GOMAXPROCS goroutines, each starting at
//     its own offset) over 100,000 distinct keys; every decision allowed.
func BenchmarkMemory(b *testing.B) {
	runCases(b, memCases(b), libraries())
}

// A memCase is one case of BenchmarkMemory.
type memCase struct {
	name     string
	scenario scenario
	keys     []string
	parallel bool
}

// memCases returns BenchmarkMemory's cases.
func memCases(b *testing.B) []memCase {
	keys10k := distinctKeys(b, 10_000)
	keys100k := distinctKeys(b, 100_000)
	return []memCase{
		{"hotkey", allowAll, keys10k[:1], false},
		{"hotkey-denied", denyAfterOne, keys10k[:1], false},
		{"keys10k", allowAll, keys10k, false},
		{"parallel100k", allowAll, keys100k, true},
	}
}

// runCases runs every library of libs on every case, as BenchmarkMemory
// describes.
func runCases(b *testing.B, cases []memCase, libs []library) {
	for _, c := range cases {
		b.Run("case="+c.name, func(b *testing.B) {
			for _, lib := range libs {
				b.Run("lib="+lib.name, func(b *testing.B) {
					b.ReportAllocs()
					d := lib.new(b, c.scenario)
					warm(b, d, c.keys)
					// Ask with equal keys in fresh memory, as a server does
					// with each request's key: a store that keeps the
					// caller's string would otherwise find its stored key
					// pointer-equal to the one asked for and skip reading it.
					keys := cloneKeys(c.keys)
					want := c.scenario == allowAll
					var wrong int64
					if c.parallel {
						wrong = runParallel(b, d, keys, want)
					} else {
						wrong = runSerial(b, d, keys, want)
					}
					if wrong != 0 {
						b.Fatalf("%s: %d decisions were allowed = %v, want %v", lib.name, wrong, !want, want)
					}
				})
			}
		})
	}
}

// warm makes one decision on every key, so that each exists in the store
// (and, under denyAfterOne, has used up its limit).
func warm(b *testing.B, d decider, keys []string) {
	b.Helper()
	ctx := context.Background()
	for _, k := range keys {
		if _, err := d.allow(ctx, k); err != nil {
			b.Fatalf("warm-up allow(%q): %v", k, err)
		}
	}
}

// runSerial times decisions over keys in round robin and returns how many
// were not want.
func runSerial(b *testing.B, d decider, keys []string, want bool) (wrong int64) {
	ctx := context.Background()
	i := 0
	b.ResetTimer()
	defer reportCPUTime(b)()
	for b.Loop() {
		ok, err := d.allow(ctx, keys[i])
		if err != nil {
			b.Fatalf("allow(%q): %v", keys[i], err)
		}
		if ok != want {
			wrong++
		}
		if i++; i == len(keys) {
			i = 0
		}
	}
	return wrong
}

// runParallel times decisions under b.RunParallel, each goroutine walking
// keys in round robin from its own offset, and returns how many were not
// want. Errors are counted as wrong too (b.Fatal may not be called from
// the parallel goroutines) and the first is reported.
func runParallel(b *testing.B, d decider, keys []string, want bool) int64 {
	var (
		goroutine atomic.Int64
		wrong     atomic.Int64
		firstErr  atomic.Pointer[error]
	)
	b.ResetTimer()
	stop := reportCPUTime(b)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		// Spread the starting points so goroutines do not walk in step.
		i := int(goroutine.Add(1)*7919) % len(keys)
		var n int64
		for pb.Next() {
			ok, err := d.allow(ctx, keys[i])
			if err != nil {
				e := err // escapes, but only on this path
				firstErr.CompareAndSwap(nil, &e)
				n++
			} else if ok != want {
				n++
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
		wrong.Add(n)
	})
	stop()
	if err := firstErr.Load(); err != nil {
		b.Fatalf("allow: %v", *err)
	}
	return wrong.Load()
}

// reportCPUTime starts measuring the process's CPU time; the function it
// returns, called after the timed loop, reports it per iteration as
// cpu-ns/op. Where CPU time cannot be read it reports nothing.
func reportCPUTime(b *testing.B) (stop func()) {
	start, ok := processCPUTime()
	return func() {
		end, ok2 := processCPUTime()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
