package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/storetest"
)

// randomLimit returns a valid limit of any algorithm, including huge quotas
// (wide limits), tiny periods, bursts other than the quota and bucketed
// precision.
func randomLimit(r *rand.Rand) core.Limit {
	periods := []time.Duration{time.Microsecond, 7 * time.Microsecond, 100 * time.Microsecond, time.Millisecond,
		30 * time.Millisecond, time.Second, 90 * time.Second, time.Hour, 24 * time.Hour, core.MaxPeriod}
	quotas := []int64{1, 2, 3, 5, 10, 100, 1000, 65536, 1 << 30, 1 << 40, core.MaxQuota}
	for {
		l := core.Limit{
			Algorithm: core.Algorithm(r.IntN(7)),
			Quota:     quotas[r.IntN(len(quotas))],
			Period:    periods[r.IntN(len(periods))],
		}
		if r.IntN(4) == 0 {
			l.Quota = 1 + r.Int64N(50)
		}
		if r.IntN(3) == 0 {
			l.Burst = []int64{1, 2, l.Quota / 2, l.Quota * 2, 1 + r.Int64N(100), core.MaxQuota}[r.IntN(6)]
		}
		if l.Algorithm == core.BucketedWindow && r.IntN(2) == 0 {
			l.Precision = l.Period / time.Duration([]int64{1, 2, 3, 4, 10, 60, 1024}[r.IntN(7)])
		}
		if l.Algorithm == core.SlidingLog && l.Quota > 1000 {
			l.Quota = 1 + r.Int64N(1000)
		}
		if l.Validate() == nil && !tooLong(l) {
			return l
		}
	}
}

// tooLong reports whether a rated limit's debt can take longer than 2^51µs
// (71 years) to drain. core.Validate accepts such limits (e.g. GCRA of 1
// per second with Burst MaxQuota), but their times pass 2^53µs, where Lua's
// doubles are no longer exact, and int64 µs even overflow in Step (AllowN of
// the burst reports ResetAfter Never): the stores cannot agree on them.
func tooLong(l core.Limit) bool {
	switch l.Algorithm {
	case core.TokenBucket, core.GCRA, core.LeakyBucket:
		return float64(core.DebtFactor)*float64(l.Capacity())/float64(l.Quota)*float64(l.Period/time.Microsecond) > 1<<51
	}
	return false
}

// randomCost returns 0, 1, a small cost, around the capacity, or huge.
func randomCost(r *rand.Rand, ls []core.Limit) int64 {
	c := ls[r.IntN(len(ls))].Capacity()
	switch r.IntN(10) {
	case 0:
		return 0
	case 1, 2, 3:
		return 1
	case 4, 5:
		return 1 + r.Int64N(5)
	case 6:
		return c
	case 7:
		return c + 1
	case 8:
		return 1 + r.Int64N(max(c, 1))
	default:
		return []int64{c * 63, c * 64, c * 65, 1 << 50, math.MaxInt64}[r.IntN(5)]
	}
}

// randomStep returns the time to the next operation: none, 1µs, a fraction
// of a period, a few periods, a huge jump, or a step back.
func randomStep(r *rand.Rand, ls []core.Limit) time.Duration {
	p := ls[r.IntN(len(ls))].Period
	switch r.IntN(12) {
	case 0, 1:
		return 0
	case 2:
		return time.Microsecond
	case 3, 4, 5:
		return time.Duration(r.Int64N(int64(p)/int64(time.Microsecond)+1)) * time.Microsecond
	case 6:
		return p / 2
	case 7:
		return p
	case 8:
		return time.Duration(1+r.Int64N(3)) * p
	case 9:
		return time.Duration(r.Int64N(int64(365 * 24 * time.Hour)))
	case 10:
		return -time.Duration(r.Int64N(int64(p)/int64(time.Microsecond)+1)) * time.Microsecond
	default:
		return time.Duration(r.Int64N(1000)) * time.Microsecond
	}
}

func randomKind(r *rand.Rand) engine.Kind {
	switch x := r.IntN(20); {
	case x < 10:
		return engine.Take
	case x < 13:
		return engine.Peek
	case x < 16:
		return engine.Charge
	case x < 19:
		return engine.Refund
	default:
		return engine.Reset
	}
}

// TestDifferentialMemstore runs random traces on the Redis store and on
// memstore, with the caller's clock, and requires identical decisions:
// even traces on a store that runs a specialized script for every layout
// without logs (fastpath.go), odd ones on a store that runs only the
// generic script.
func TestDifferentialMemstore(t *testing.T) { differential(t, 300, randomLimit) }

// differential runs the traces of TestDifferentialMemstore, with limits
// from newLimit. TRACES sets their number; TRACE and SEED, from a failure's
// message, replay one.
func differential(t *testing.T, traces int, newLimit func(*rand.Rand) core.Limit) {
	c := newClient(t)
	special, plain := newStore(t, c), newStore(t, c)
	special.maxScripts, plain.maxScripts = 1<<30, 0
	ops := 60
	if os.Getenv("TRACES") != "" {
		traces, _ = strconv.Atoi(os.Getenv("TRACES"))
	}
	if testing.Short() {
		traces /= 5
	}
	base := uint64(time.Now().UnixNano())
	for tr := range traces {
		seed := base + uint64(tr)
		if s := os.Getenv("SEED"); s != "" { // replay one trace
			seed, _ = strconv.ParseUint(s, 10, 64)
			tr, _ = strconv.Atoi(os.Getenv("TRACE"))
		}
		rs := special
		if tr%2 == 1 {
			rs = plain
		}
		differentialTrace(t, rs, tr, seed, ops, newLimit)
		if os.Getenv("SEED") != "" {
			return
		}
	}
}

// wideLimit returns a valid wide limit (engine.Limit.Wide): TokenBucket,
// GCRA, LeakyBucket or SlidingWindow whose Capacity × Period passes 2^47µs,
// up to the Compile maxima (MaxQuota, MaxPeriod), where products pass 2^53
// and the script takes its exact path.
func wideLimit(r *rand.Rand) core.Limit {
	algs := []core.Algorithm{core.TokenBucket, core.GCRA, core.LeakyBucket, core.SlidingWindow}
	periods := []time.Duration{time.Second, 1500 * time.Millisecond, time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour,
		86_400_000_001 * time.Microsecond, core.MaxPeriod}
	quotas := []int64{1_000_000, 10_000_000, 123_456_789, 1 << 30, 1 << 40, core.MaxQuota - 1, core.MaxQuota}
	for {
		l := core.Limit{
			Algorithm: algs[r.IntN(len(algs))],
			Quota:     quotas[r.IntN(len(quotas))],
			Period:    periods[r.IntN(len(periods))],
		}
		if r.IntN(3) == 0 {
			l.Quota = 1 + r.Int64N(l.Quota)
		}
		if r.IntN(3) == 0 {
			l.Burst = []int64{l.Quota / 3, l.Quota * 2, core.MaxQuota}[r.IntN(3)]
		}
		if p, err := storetest.Compile(l); err == nil && p.Wide && !tooLong(l) {
			return l
		}
	}
}

// TestDifferentialWideLimits is TestDifferentialMemstore on wide limits
// only, whose products pass 2^53: the script's exact path.
func TestDifferentialWideLimits(t *testing.T) { differential(t, 200, wideLimit) }

// differentialTrace runs trace number tr of seed, with limits from
// newLimit, on rs and on a memstore.
func differentialTrace(t *testing.T, rs *Store, tr int, seed uint64, ops int, newLimit func(*rand.Rand) core.Limit) {
	t.Helper()
	ctx := context.Background()
	if tr%4 >= 2 {
		// Under a deadline a call with nothing else in flight goes
		// inline, leaving a receipt in the key its states share (see
		// inline.go): half the traces compare that path too.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	{
		r := rand.New(rand.NewPCG(seed, 7))
		ms := memstore.New(memstore.WithSweepInterval(0))
		n := 1 + r.IntN(3)
		if r.IntN(10) == 0 {
			n = 5
		}
		limits := make([]core.Limit, n)
		for i := range limits {
			limits[i] = newLimit(r)
		}
		// A second set of limits on the same key, as another Limiter (an
		// app-wide limit and a route's) would apply: some of the first set,
		// reordered and requoted (same layouts), some new.
		var limits2 []core.Limit
		for _, l := range limits {
			if r.IntN(2) == 0 {
				// Halving the quota can make a valid limit invalid (a
				// burst that would drain too slowly): keep such a
				// limit at its own quota.
				if h := l; h.Quota > 1 {
					h.Quota /= 2
					if h.Validate() == nil && !tooLong(h) {
						l = h
					}
				}
				limits2 = append(limits2, l)
			}
		}
		for range r.IntN(3) {
			limits2 = append(limits2, newLimit(r))
		}
		if len(limits2) == 0 {
			limits2 = append(limits2, limits[0])
		}
		r.Shuffle(len(limits2), func(i, j int) { limits2[i], limits2[j] = limits2[j], limits2[i] })
		now := time.UnixMicro(1_700_000_000_000_000 + r.Int64N(1e15))
		key := fmt.Sprintf("trace %d {%d}\n\xff", tr, seed)
		// One trace in 8 is long and dense, so that logs grow past the
		// chunks the script reads them in.
		long, nops := tr%8 == 0, ops
		if long {
			nops = 8 * ops
		}
		var receipts []engine.Receipt // of the charges so far, any plan's
		for i := range nops {
			if long && r.IntN(8) != 0 {
				now = now.Add(time.Duration(r.Int64N(20)) * time.Microsecond)
			} else {
				now = now.Add(randomStep(r, limits))
			}
			ls := limits
			if r.IntN(4) == 0 {
				ls = limits2
			}
			scope := ""
			if r.IntN(8) == 0 {
				scope = "other scope"
			}
			op := engine.Op{Plan: planOf(scope, ls...), Kind: randomKind(r), Key: key, Cost: randomCost(r, ls), Now: (now).UnixMicro()}
			if op.Kind == engine.Peek && r.IntN(2) == 0 {
				op.Cost = 0
			}
			if op.Kind == engine.Refund && len(receipts) > 0 && r.IntN(3) != 0 {
				// A refund to where a charge went: this window's or a
				// gone one's, under its own plan or the other (whose
				// resets then do not count); now and then one known
				// only within a span.
				rc := receipts[r.IntN(len(receipts))]
				if r.IntN(5) == 0 {
					rc.Span = min(r.Int64N(3_000_000), rc.At)
				}
				if r.IntN(3) == 0 {
					rc.Cost = min(rc.Cost, op.Cost)
				}
				op.Receipt = &rc
			}
			want, werr := ms.Apply(ctx, op)
			got, gerr := rs.Apply(ctx, op)
			if (werr != nil) != (gerr != nil) || gerr != nil && !errors.Is(gerr, errors.Unwrap(werr)) {
				t.Fatalf("trace %d (TRACE=%d SEED=%d) op %d: %s cost %d at %d over %v: error %v, memstore %v", tr, tr, seed, i, op.Kind, op.Cost, now.UnixMicro(), ls, gerr, werr)
			}
			if os.Getenv("SEED") != "" {
				t.Logf("op %d %s cost %d at %d: %+v", i, op.Kind, op.Cost, now.UnixMicro(), got)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("trace %d (TRACE=%d SEED=%d) op %d: %s cost %d at %d (receipt %+v) over %v:\n redis    %+v\n memstore %+v", tr, tr, seed, i, op.Kind, op.Cost, now.UnixMicro(), op.Receipt, ls, got, want)
			}
			if werr == nil && op.Cost > 0 && (op.Kind == engine.Take && want.Allowed || op.Kind == engine.Charge) {
				receipts = append(receipts, engine.ReceiptOf(&want, op.Cost))
			}
		}
		ms.Close()
	}
}
