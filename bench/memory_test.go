package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
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
// Cases, each of three key sets and four limits (scenario):
//   - hotkey: one key, repeated.
//   - keys10k: 10,000 distinct keys in round robin.
//   - parallel100k: b.RunParallel (GOMAXPROCS goroutines, each starting at
//     its own offset) over 100,000 distinct keys.
//
// and, after a dash, the limit: none, 1e8 per second (allowAll, every
// decision allowed); "large", 1e9 per hour with a burst of 1e9, whose
// Burst × Period passes 2^47 µs (allowLarge, every decision allowed);
// "denied", 1 per hour, used up (denyAfterOne, every decision denied);
// "denied-few", 5 per second, used up (denyFew, denied but for what the
// refill admits). Libraries that keep an entry per key are checked to
// hold one per key after warming up (a key set that repeated would
// measure fewer keys than its name says).
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
	var cases []memCase
	for _, set := range []struct {
		name     string
		keys     []string
		parallel bool
	}{
		{"hotkey", keys10k[:1], false},
		{"keys10k", keys10k, false},
		{"parallel100k", keys100k, true},
	} {
		for _, sc := range []struct {
			suffix string
			s      scenario
		}{{"", allowAll}, {"-large", allowLarge}, {"-denied", denyAfterOne}, {"-denied-few", denyFew}} {
			cases = append(cases, memCase{set.name + sc.suffix, sc.s, set.keys, set.parallel})
		}
	}
	return cases
}

// A counter is a decider that can say how many keys it holds state for.
type counter interface {
	entries() int
}

// runCases runs every library of libs on every case, as BenchmarkMemory
// describes.
func runCases(b *testing.B, cases []memCase, libs []library) {
	for _, c := range cases {
		b.Run("case="+c.name, func(b *testing.B) {
			for _, lib := range libs {
				b.Run("lib="+lib.name, func(b *testing.B) {
					b.ReportAllocs()
					d := warmed(b, lib, c)
					// Ask with equal keys in fresh memory, as a server does
					// with each request's key: a store that keeps the
					// caller's string would otherwise find its stored key
					// pointer-equal to the one asked for and skip reading it.
					keys := cloneKeys(c.keys)
					want := c.scenario.allowed()
					var wrong int64
					start := time.Now()
					if c.parallel {
						wrong = runParallel(b, d, keys, want)
					} else {
						wrong = runSerial(b, d, keys, want)
					}
					if bound := c.scenario.allowedBound(len(keys), time.Since(start)); wrong > bound {
						b.Fatalf("%s: %d decisions were allowed = %v, want %v (at most %d may be)", lib.name, wrong, !want, want, bound)
					}
				})
			}
		})
	}
}

// warmed returns lib's decider for c's scenario, its keys warmed, and
// checks that it holds one entry per key where it can say.
func warmed(b *testing.B, lib library, c memCase) decider {
	b.Helper()
	d := lib.new(b, c.scenario)
	for range c.scenario.warmups() {
		warm(b, d, c.keys)
	}
	if n, ok := d.(counter); ok && n.entries() != len(c.keys) {
		b.Fatalf("%s holds %d keys after warming up %d distinct ones", lib.name, n.entries(), len(c.keys))
	}
	return d
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
