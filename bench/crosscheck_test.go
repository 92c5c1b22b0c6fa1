package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"golang.org/x/time/rate"
)

// TestTokenBucketMatchesXRate checks that core.TokenBucket decides as
// golang.org/x/time/rate's AllowN(t, n) does, with r = Quota/Period and
// b = Burst, over a randomized (but seeded, so repeatable) trace of fixed
// instants and costs. Every instant of the trace is compared; none is
// skipped.
//
// The two may differ only at an instant within 1µs of a refill boundary
// (the instant at which the bucket holds exactly the cost asked for), and
// the test tolerates a difference there and nowhere else:
//
//   - x/time/rate computes in float64 seconds: tokens += elapsed.Seconds()·r,
//     and it admits a deficit smaller than one nanosecond's worth of tokens,
//     since the wait it computes truncates to whole nanoseconds. Its errors
//     are of the order of nanoseconds.
//   - Tollgate computes exactly, in integers, on time truncated to whole
//     microseconds (for the limits used here: Burst × Period in µs stays
//     under 2^47, so its tick is 1µs). At an instant t that is not a whole
//     microsecond it decides as the exact bucket would at ⌊t⌋µs, which
//     differs from the exact bucket at t only when a refill boundary lies in
//     (⌊t⌋µs, t]. Truncation does not accumulate: refill is linear, so the
//     state after any history is within 1µs of refill of the exact one.
//
// Where the boundary is is decided by a third model, exactBucket, which
// follows x/time/rate's decisions in exact integer nanoseconds. A tolerated
// difference leaves the two limiters in different states, so the trace goes
// on with a fresh limit (a new episode) on both; any other difference fails
// the test.
func TestTokenBucketMatchesXRate(t *testing.T) {
	const steps = 200_000
	var (
		ctx   = context.Background()
		rng   = rand.New(rand.NewPCG(2, 11))
		clock = &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
		store = memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	)
	defer func() {
		if err := store.Close(); err != nil {
			t.Errorf("memstore Close: %v", err)
		}
	}()

	var equal, tolerated, earlier, onMicro, xrateOff, allowed, nearBoundary, episodes, failures int
	for step := 0; step < steps; episodes++ {
		limit := randomTokenBucket(rng)
		lim, err := core.New(store, limit, core.WithClock(clock))
		if err != nil {
			t.Fatalf("core.New(%v): %v", limit, err)
		}
		burst := limit.Capacity()
		xr := rate.NewLimiter(rate.Limit(float64(limit.Quota)/limit.Period.Seconds()), int(burst))
		exact := newExactBucket(limit.Quota, limit.Period, burst, clock.t)
		key := fmt.Sprintf("episode-%d", episodes)

		for n := 1 + rng.IntN(400); n > 0 && step < steps; n, step = n-1, step+1 {
			cost := randomCost(rng, burst)
			clock.t = exact.nextInstant(rng, clock.t, cost)

			d, err := lim.AllowN(ctx, key, cost)
			if err != nil {
				t.Fatalf("AllowN(%v, %d) on %v: %v", clock.t, cost, limit, err)
			}
			want := xr.AllowN(clock.t, int(cost))
			exactOK, gap, bounded := exact.decide(clock.t, cost)
			near := bounded && gap >= -1000*exact.q && gap <= 1000*exact.q
			if want {
				exact.take(cost)
			}
			if near {
				nearBoundary++
			}
			if exactOK != want {
				xrateOff++
			}
			if exactOK != want && !near {
				// The model, not Tollgate, is wrong: the test cannot judge.
				t.Fatalf("exactBucket(%v, %d) on %v = %v, but x/time/rate says %v, away from any boundary", clock.t, cost, limit, exactOK, want)
			}

			switch {
			case d.Allowed == want:
				equal++
				if want {
					allowed++
				}
				continue
			case near:
				tolerated++
				if d.Allowed {
					earlier++
				}
				if clock.t.Nanosecond()%1000 == 0 {
					onMicro++
				}
			default:
				failures++
				where := "cost above burst, no refill boundary"
				if bounded {
					where = fmt.Sprintf("%+.3fns from the refill boundary", -float64(gap)/float64(exact.q))
				}
				t.Errorf("episode %d, %v (rate %v/s, burst %d): AllowN(%v, %d) = %v, want %v (x/time/rate); %s",
					episodes, limit, float64(xr.Limit()), xr.Burst(), clock.t.Format(time.RFC3339Nano), cost, d.Allowed, want, where)
				if failures == 10 {
					t.FailNow()
				}
			}
			n = 0 // the states differ now: go on with a fresh limit
		}
	}

	t.Logf("%d instants in %d episodes: %d decisions exactly equal (%d allowed, %d denied); %d differed, all within 1µs of a refill boundary "+
		"(%d instants were that near one): Tollgate allowed first in %d, x/time/rate in %d; %d on a whole microsecond. "+
		"x/time/rate itself differed from the exact nanosecond bucket at %d instants",
		steps, episodes, equal, allowed, equal-allowed, tolerated, nearBoundary, earlier, tolerated-earlier, onMicro, xrateOff)
	// The trace must exercise both outcomes and the boundaries, or it proves
	// little.
	if allowed < steps/10 || equal-allowed < steps/10 || nearBoundary < steps/50 {
		t.Errorf("trace too easy: %d allowed, %d denied, %d near a boundary of %d", allowed, equal-allowed, nearBoundary, steps)
	}
}

// fakeClock is a core.Clock that the test moves by hand. It is not safe for
// concurrent use (the store's sweeper is off).
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

// randomTokenBucket returns a TokenBucket limit with Quota in [1, 1000],
// Period from 1µs to 1h, and Burst either the default (Quota) or in
// [1, 1000]: Burst × Period in µs stays under 2^47, so Tollgate's tick is
// 1µs.
func randomTokenBucket(rng *rand.Rand) core.Limit {
	periods := []time.Duration{
		time.Microsecond, 7 * time.Microsecond, time.Millisecond, 13 * time.Millisecond,
		time.Second, 3 * time.Second, time.Minute, time.Hour,
	}
	var p time.Duration
	if rng.IntN(4) == 0 {
		p = time.Duration(1+rng.Int64N(10_000_000)) * time.Microsecond // up to 10 s
	} else {
		p = periods[rng.IntN(len(periods))]
	}
	l := core.Per(1+rng.Int64N(1000), p).WithAlgorithm(core.TokenBucket)
	if rng.IntN(2) == 0 {
		l = l.WithBurst(1 + rng.Int64N(1000))
	}
	return l
}

// randomCost returns mostly 1, sometimes any cost up to burst, 0, or a cost
// above burst (which neither library ever admits).
func randomCost(rng *rand.Rand, burst int64) int64 {
	switch r := rng.IntN(100); {
	case r < 60:
		return 1
	case r < 90:
		return 1 + rng.Int64N(burst)
	case r < 95:
		return 0
	default:
		return burst + 1 + rng.Int64N(3)
	}
}

// exactBucket is the token bucket computed exactly in integer nanoseconds:
// a = tokens × Period (ns), so that a refill of Quota per Period is Quota
// per nanosecond. It starts full, as x/time/rate's NewLimiter does.
type exactBucket struct {
	q, pns, burst int64
	a             int64     // tokens × pns
	last          time.Time // instant a is for
}

func newExactBucket(q int64, period time.Duration, burst int64, now time.Time) *exactBucket {
	return &exactBucket{q: q, pns: int64(period), burst: burst, a: burst * int64(period), last: now}
}

// roll refills the bucket up to now.
func (e *exactBucket) roll(now time.Time) {
	if !now.After(e.last) {
		return
	}
	el := int64(now.Sub(e.last))
	full := e.burst * e.pns
	if el >= (full-e.a+e.q-1)/e.q {
		e.a = full
	} else {
		e.a += el * e.q
	}
	e.last = now
}

// decide rolls the bucket to now and reports whether cost fits, and gap:
// Q × (b − now) in ns, where b is the refill boundary for cost, the instant
// at which the bucket holds exactly cost tokens (positive: still ahead).
// A cost above burst has no boundary: bounded is false.
func (e *exactBucket) decide(now time.Time, cost int64) (ok bool, gap int64, bounded bool) {
	e.roll(now)
	if cost > e.burst {
		return false, 0, false
	}
	gap = cost*e.pns - e.a
	return gap <= 0, gap, true
}

// take removes cost tokens; the caller has rolled the bucket.
func (e *exactBucket) take(cost int64) { e.a -= cost * e.pns }

// nextInstant returns the trace's next instant, never before prev: often
// an instant right at, or a few nanoseconds or microseconds around, the
// refill boundary for cost, sometimes on a whole microsecond, sometimes
// prev again, otherwise a random gap of up to twice the refill time of
// cost.
func (e *exactBucket) nextInstant(rng *rand.Rand, prev time.Time, cost int64) time.Time {
	e.roll(prev)
	refill := max(cost*e.pns/e.q, 1) // ns to refill cost tokens
	var t time.Time
	switch r := rng.IntN(100); {
	case r < 15:
		return prev
	case r < 55 && cost <= e.burst && cost*e.pns > e.a:
		// Right around the boundary: ceil((cost·P − a)/Q) ns after prev is
		// the first whole nanosecond at which cost fits.
		b := prev.Add(time.Duration((cost*e.pns - e.a + e.q - 1) / e.q))
		offsets := []time.Duration{0, 0, -1, 1, -2, 2, -500, 500, -999, 999, -1000, 1000, -1001, 1001, -1500, 1500}
		if rng.IntN(4) == 0 {
			t = b.Add(time.Duration(rng.Int64N(6001) - 3000))
		} else {
			t = b.Add(offsets[rng.IntN(len(offsets))])
		}
		if rng.IntN(3) == 0 { // on a whole microsecond, where Tollgate does not truncate
			t = t.Truncate(time.Microsecond)
		}
	default:
		t = prev.Add(time.Duration(rng.Int64N(2*refill + 1)))
		if rng.IntN(5) == 0 {
			t = t.Truncate(time.Microsecond)
		}
	}
	if t.Before(prev) {
		return prev
	}
	return t
}
