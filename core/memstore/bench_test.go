package memstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// distinctKeys returns n keys and fails the benchmark unless they are
// pairwise distinct.
func distinctKeys(b *testing.B, n int) []string {
	b.Helper()
	keys := make([]string, n)
	seen := make(map[string]struct{}, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
		seen[keys[i]] = struct{}{}
	}
	if len(seen) != n {
		b.Fatalf("%d keys but only %d distinct", n, len(seen))
	}
	return keys
}

func newLimiter(b *testing.B, limits ...core.Limit) (*core.Limiter, *memstore.Store) {
	b.Helper()
	s := memstore.New()
	b.Cleanup(func() { s.Close() })
	opts := make([]core.Option, len(limits))
	for i, l := range limits {
		opts[i] = l
	}
	lim, err := core.New(s, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return lim, s
}

func BenchmarkAllow(b *testing.B) {
	ctx := context.Background()
	cases := []struct {
		name   string
		limits []core.Limit
	}{
		{"allowed", []core.Limit{core.PerSecond(100_000_000)}},
		{"denied", []core.Limit{core.PerHour(1)}},
		{"gcra", []core.Limit{core.PerSecond(100_000_000).WithAlgorithm(core.GCRA)}},
		{"token", []core.Limit{core.PerSecond(100_000_000).WithAlgorithm(core.TokenBucket)}},
		// Wide limits (engine.Limit.Wide: Burst × Period past 2^47µs),
		// which compute their products in 128 bits.
		{"wide/allowed", []core.Limit{core.PerHour(1_000_000_000)}},
		{"wide/gcra", []core.Limit{core.PerHour(1_000_000_000).WithAlgorithm(core.GCRA)}},
		{"wide/token", []core.Limit{core.PerHour(1_000_000_000).WithAlgorithm(core.TokenBucket)}},
		{"wide/denied", []core.Limit{core.Per(5, core.MaxPeriod)}}, // 5 × 400 days > 2^47µs
		{"three-limits", []core.Limit{core.PerSecond(100_000_000), core.PerMinute(1_000_000_000), core.PerHour(1_000_000_000).WithAlgorithm(core.GCRA)}},
		// The README's three limits on one client, who has used them up.
		{"three-limits-denied", []core.Limit{core.PerSecond(10), core.PerMinute(120), core.PerHour(240)}},
	}
	for _, c := range cases {
		b.Run("hotkey/"+c.name, func(b *testing.B) {
			lim, _ := newLimiter(b, c.limits...)
			lim.Allow(ctx, "hot")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := lim.Allow(ctx, "hot"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("keys=10k/round-robin", func(b *testing.B) {
		lim, s := newLimiter(b, core.PerSecond(100_000_000))
		keys := distinctKeys(b, 10_000)
		for _, k := range keys {
			lim.Allow(ctx, k)
		}
		if s.Len() != len(keys) {
			b.Fatalf("store holds %d keys, want %d", s.Len(), len(keys))
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			lim.Allow(ctx, keys[i])
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
	b.Run("keys=100k/parallel", func(b *testing.B) { allowParallel(b, core.PerSecond(100_000_000)) })
	// The README's three limits, over many clients, each soon held to them.
	b.Run("keys=100k/parallel/three-limits", func(b *testing.B) {
		allowParallel(b, core.PerSecond(10), core.PerMinute(120), core.PerHour(240))
	})
}

// allowParallel times Allow under b.RunParallel over 100k keys in turn,
// each used once before timing.
func allowParallel(b *testing.B, limits ...core.Limit) {
	ctx := context.Background()
	lim, s := newLimiter(b, limits...)
	keys := distinctKeys(b, 100_000)
	for _, k := range keys {
		lim.Allow(ctx, k)
	}
	if s.Len() != len(keys) {
		b.Fatalf("store holds %d keys, want %d", s.Len(), len(keys))
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919)) % len(keys)
		for pb.Next() {
			lim.Allow(ctx, keys[i])
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
}

// BenchmarkFlood measures a flood of distinct keys at a full store: every
// call stores a new key and evicts one, by default a key of the flood
// itself (see WithMaxKeys).
func BenchmarkFlood(b *testing.B) {
	ctx := context.Background()
	for _, alg := range []core.Algorithm{core.SlidingWindow, core.GCRA} {
		b.Run(alg.String(), func(b *testing.B) {
			const maxKeys = 100_000
			s := memstore.New(memstore.WithMaxKeys(maxKeys), memstore.WithSweepInterval(0))
			b.Cleanup(func() { s.Close() })
			lim, err := core.New(s, core.PerHour(10).WithAlgorithm(alg))
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			key := func(i int) string {
				buf = strconv.AppendInt(append(buf[:0], "flood-"...), int64(i), 10)
				return string(buf)
			}
			for i := range maxKeys {
				lim.Allow(ctx, key(i))
			}
			before := s.Evictions()
			b.ReportAllocs()
			i := maxKeys
			for b.Loop() {
				lim.Allow(ctx, key(i))
				i++
			}
			if s.Evictions() == before {
				b.Fatalf("no key was evicted: the store was not full")
			}
		})
	}
}

// BenchmarkInFlightAllowRelease is one AllowN and one Release of an
// InFlight limit on a hot key that holds n units already: its cost must
// not grow with n. The release ends the oldest acquisition (requests
// finishing in order) or a random one.
func BenchmarkInFlightAllowRelease(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{10, 1_000, 10_000, 60_000} {
		for _, order := range []string{"oldest", "random"} {
			b.Run(order+"/"+strconv.Itoa(n), func(b *testing.B) {
				lim, _ := newLimiter(b, core.InFlight(core.MaxLogQuota, time.Hour))
				held := make([]int64, 0, n+1)
				for range n {
					d, err := lim.Allow(ctx, "hot")
					if err != nil || !d.Allowed {
						b.Fatalf("Allow = %+v, %v while filling", d, err)
					}
					held = append(held, d.Lease)
				}
				rng := rand.New(rand.NewPCG(1, 2))
				b.ReportAllocs()
				for b.Loop() {
					d, err := lim.Allow(ctx, "hot")
					if err != nil || !d.Allowed {
						b.Fatalf("Allow = %+v, %v with %d in flight", d, err, n)
					}
					held = append(held, d.Lease)
					i := 0 // held is in lease order: the oldest first
					if order == "random" {
						i = rng.IntN(len(held))
					}
					if _, err := lim.Release(ctx, "hot", held[i]); err != nil {
						b.Fatal(err)
					}
					if i == 0 {
						held = held[1:]
					} else {
						held[i] = held[len(held)-1]
						held = held[:len(held)-1]
					}
				}
			})
		}
	}
}
