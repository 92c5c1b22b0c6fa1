package bench

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkMemoryPaired is BenchmarkMemory with the libraries interleaved,
// for a ratio that this machine's noise does not swamp. BenchmarkMemory
// runs one library after another, each for a fraction of a second; on a
// shared machine whose speed moves by a third in stretches of a minute or
// so, two libraries of the same run can then be timed in different
// stretches, and a run's ratio says more about the machine than about
// them. Here every library of a case is built and warmed first, and then
// each iteration of the loop is a round in which every library makes
// pairedDecisions decisions (a millisecond or two), timed apart, one
// library after another in an order drawn afresh each round. Every
// library thus meets the same stretches, and follows every other one's
// batch as often.
//
// Each case reports, for every library, its mean time a decision
// (LIB-ns/op, wall time: the batches alternate too quickly for the
// process's CPU time, read per batch, to be worth its cost) and, for each
// of Tollgate's algorithms, the fastest peer's time ÷ Tollgate's
// (peer/LIB: above 1, Tollgate is the faster); no CPU time and no
// allocations (BenchmarkMemory has both). The benchmark's own ns/op is a
// whole round's. The cases, keys and checks are BenchmarkMemory's, with
// two differences: a library's keys refill while the others take their
// turns, so under denied-few more of its decisions are allowed; and a
// parallel case runs GOMAXPROCS goroutines in each batch, each walking
// the keys from its own offset with an equal share, so that a batch lasts
// as long as its slowest goroutine. Over 100k keys, the other libraries'
// batches leave each one's state out of the caches, which
// BenchmarkMemory's runs keep it in. Run it for a fixed number of rounds:
//
//	go test -run '^$' -bench '^BenchmarkMemoryPaired$' -benchtime 40x -count 3 .
func BenchmarkMemoryPaired(b *testing.B) {
	libs := libraries()
	for _, c := range memCases(b) {
		b.Run("case="+c.name, func(b *testing.B) {
			ds := make([]decider, len(libs))
			for i, lib := range libs {
				ds[i] = warmed(b, lib, c)
			}
			keys := cloneKeys(c.keys) // equal keys in fresh memory, as runCases asks
			want := c.scenario.allowed()
			walkers := 1
			if c.parallel {
				walkers = runtime.GOMAXPROCS(0)
			}
			per := pairedDecisions / walkers // each walker's share of a batch
			at := make([][]int, len(libs))   // each library's walkers' places in keys
			for i := range at {
				at[i] = make([]int, walkers)
				for w := range at[i] {
					at[i][w] = (w * 7919) % len(keys)
				}
			}
			spent := make([]time.Duration, len(libs))
			wrong := make([]int64, len(libs))
			order := rand.New(rand.NewPCG(1, 2))
			start := time.Now()
			rounds := 0
			for b.Loop() {
				for _, k := range order.Perm(len(libs)) {
					t0 := time.Now()
					n, err := pairedBatch(ds[k], keys, at[k], per, want)
					spent[k] += time.Since(t0)
					if err != nil {
						b.Fatalf("%s: allow: %v", libs[k].name, err)
					}
					wrong[k] += n
				}
				rounds++
			}
			bound := c.scenario.allowedBound(len(keys), time.Since(start))
			decisions := float64(rounds * per * walkers)
			fastest := time.Duration(0)
			for k, lib := range libs {
				if wrong[k] > bound {
					b.Fatalf("%s: %d decisions were allowed = %v, want %v (at most %d may be)", lib.name, wrong[k], !want, want, bound)
				}
				b.ReportMetric(float64(spent[k])/decisions, lib.name+"-ns/op")
				if !strings.HasPrefix(lib.name, "tollgate") && (fastest == 0 || spent[k] < fastest) {
					fastest = spent[k]
				}
			}
			for k, lib := range libs {
				if strings.HasPrefix(lib.name, "tollgate") {
					b.ReportMetric(float64(fastest)/float64(spent[k]), "peer/"+lib.name)
				}
			}
		})
	}
}

// pairedDecisions is how many decisions each library makes in a round of
// BenchmarkMemoryPaired: a millisecond or two, far shorter than this
// machine's slow and fast stretches, and long enough that the two clock
// reads around a batch are lost in it.
const pairedDecisions = 10_000

// pairedBatch makes per decisions with d on each of len(at) walkers
// (goroutines, when there are several), walker w going round keys from
// at[w], which it leaves where it stopped. It returns how many decisions
// were not want, and the first error.
func pairedBatch(d decider, keys []string, at []int, per int, want bool) (wrong int64, err error) {
	ctx := context.Background()
	walk := func(w, n int) (wrong int64, err error) {
		i := at[w]
		for range n {
			ok, e := d.allow(ctx, keys[i])
			if e != nil {
				if err == nil {
					err = e
				}
				wrong++
			} else if ok != want {
				wrong++
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
		at[w] = i
		return wrong, err
	}
	if len(at) == 1 {
		return walk(0, per)
	}
	var (
		wg       sync.WaitGroup
		total    atomic.Int64
		firstErr atomic.Pointer[error]
	)
	for w := range at {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, e := walk(w, per)
			total.Add(n)
			if e != nil {
				firstErr.CompareAndSwap(nil, &e)
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		err = *e
	}
	return total.Load(), err
}
