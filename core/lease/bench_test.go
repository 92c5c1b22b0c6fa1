package lease_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease"
	"github.com/tollgate/tollgate/core/memstore"
)

// remote hides memstore's InProcess marker, so that a Limiter treats it as
// a remote store, as it treats Redis (timeout, breaker).
type remote struct{ core.Store }

// BenchmarkLeasedHotKey measures a Limiter on a leased store deciding one
// key, from one goroutine and in parallel (64 per GOMAXPROCS would be
// SetParallelism(64)): what a hot key costs once its slices are local.
func BenchmarkLeasedHotKey(b *testing.B) {
	for _, par := range []int{0, 32} {
		b.Run("parallelism="+strconv.Itoa(par), func(b *testing.B) {
			st, err := lease.New(remote{memstore.New()})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			lim, err := core.New(st, core.Per(1e9, time.Second))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			if par == 0 {
				for b.Loop() {
					if d, err := lim.Allow(ctx, "hot"); err != nil || !d.Allowed {
						b.Fatal(d, err)
					}
				}
			} else {
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if d, err := lim.Allow(ctx, "hot"); err != nil || !d.Allowed {
							b.Error(d, err)
							return
						}
					}
				})
			}
			s := st.Stats()
			b.ReportMetric(float64(s.Reservations)/float64(s.Local+s.Waits), "reservations/op")
		})
	}
}

// BenchmarkLeasedColdKeys measures keys asked once each, which leases
// cannot help: the allowance's bookkeeping on top of the store's call.
func BenchmarkLeasedColdKeys(b *testing.B) {
	for _, leased := range []bool{false, true} {
		b.Run("leased="+strconv.FormatBool(leased), func(b *testing.B) {
			var st core.Store = remote{memstore.New()}
			if leased {
				ls, err := lease.New(st, lease.WithMaxKeys(1<<20))
				if err != nil {
					b.Fatal(err)
				}
				st = ls
			}
			defer st.Close()
			lim, err := core.New(st, core.Per(1e9, time.Second))
			if err != nil {
				b.Fatal(err)
			}
			keys := make([]string, 1<<16)
			for i := range keys {
				keys[i] = "key-" + strconv.Itoa(i)
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := lim.Allow(ctx, keys[i%len(keys)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
