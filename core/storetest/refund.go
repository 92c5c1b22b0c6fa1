package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
)

// clockAt is a core.Clock that reads a time the test sets.
type clockAt struct{ t time.Time }

func (c *clockAt) Now() time.Time { return c.t }

// testRefundsStayInTheirWindow: a refund with a receipt goes back to the
// state its charge went into, never creating room in a window that did
// not hold the units (the traces of issue 21, on every algorithm).
func testRefundsStayInTheirWindow(t *testing.T, st core.Store) {
	ctx := context.Background()
	second := Epoch.Truncate(time.Second).Add(10 * time.Second) // a window boundary
	at := func(ms int) time.Time { return second.Add(time.Duration(ms) * time.Millisecond) }
	limiter := func(t *testing.T, l core.Limit, clock *clockAt) *core.Limiter {
		t.Helper()
		lim, err := core.New(st, l, core.WithClock(clock), core.WithName(fmt.Sprintf("refund-%p", clock)))
		if err != nil {
			t.Fatal(err)
		}
		return lim
	}
	// admit asks n requests of one unit at once and returns how many pass.
	admit := func(t *testing.T, lim *core.Limiter, key string, n int) int {
		t.Helper()
		k := 0
		for range n {
			d, err := lim.Allow(ctx, key)
			if err != nil {
				t.Fatalf("Allow: %v", err)
			}
			if d.Allowed {
				k++
			}
		}
		return k
	}
	take := func(t *testing.T, lim *core.Limiter, key string, n int64) core.Decision {
		t.Helper()
		d, err := lim.AllowN(ctx, key, n)
		if err != nil || !d.Allowed {
			t.Fatalf("AllowN(%d) = %+v, %v; want allowed", n, d, err)
		}
		return d
	}
	refund := func(t *testing.T, lim *core.Limiter, key string, d core.Decision, n int64) {
		t.Helper()
		if _, err := lim.RefundTo(ctx, key, d.Receipt(), n); err != nil {
			t.Fatalf("RefundTo: %v", err)
		}
	}

	// Issue 21's traces, and one per algorithm where a refund that came
	// too late used to create room.
	type step struct {
		ms     int   // when, in ms from a second's boundary
		take   int64 // units taken
		charge bool  // the take is the charge refunded (default: the first)
		back   bool  // refund the charge, in full, with its receipt
		ask    int   // requests of one unit asked: want pass
		want   int
	}
	for _, tc := range []struct {
		name  string
		alg   core.Algorithm
		steps []step
	}{
		// 10 at 0.9 s, 10 at 1.1 s, the first refunded at 1.2 s: it was
		// never in [1 s, 2 s), so 20 asked at 1.3 s get nothing.
		{"a fixed window's refund after its window ends", core.FixedWindow, []step{
			{ms: 900, take: 10}, {ms: 1100, take: 10}, {ms: 1200, back: true}, {ms: 1300, ask: 20, want: 0}}},
		// 10 at 0.9 s, 5 at 1.5 s, the first refunded at 1.6 s: out of
		// the previous window's count, not the current one's, so 5 pass at
		// 1.9 s (10 standing in [1 s, 2 s), nothing before), not 9.
		{"a sliding window's refund into the previous window", core.SlidingWindow, []step{
			{ms: 900, take: 10}, {ms: 1500, take: 5}, {ms: 1600, back: true}, {ms: 1900, ask: 20, want: 5}}},
		// A refund of the current window's charge, as before.
		{"a sliding window's refund within its window", core.SlidingWindow, []step{
			{ms: 1100, take: 10}, {ms: 1500, back: true}, {ms: 1600, ask: 20, want: 10}}},
		// The charge's entry at 0.9 s is emptied, the one at 1.1 s stays:
		// nothing passes at 1.3 s; had the refund taken the newest entry
		// (the older meaning), 10 would have.
		{"a sliding log's refund from the charge's own entry", core.SlidingLog, []step{
			{ms: 900, take: 4}, {ms: 1100, take: 6}, {ms: 1200, back: true}, {ms: 1300, ask: 20, want: 4}, {ms: 1950, ask: 20, want: 0},
			{ms: 2150, ask: 20, want: 6}}},
		{"a bucketed window's refund into the charge's bucket", core.BucketedWindow, []step{
			{ms: 900, take: 4}, {ms: 1100, take: 6}, {ms: 1200, back: true}, {ms: 1300, ask: 20, want: 4}, {ms: 1950, ask: 20, want: 0},
			{ms: 2150, ask: 20, want: 6}}},
		// Full at 0.9 s, drained; full again by 1.9 s, drained again. The
		// first charge was repaid by 1.9 s: undoing it gives nothing, and
		// 2 have refilled by 2.1 s (the older refund gave 10 back).
		{"a token bucket refilled since the charge", core.TokenBucket, []step{
			{ms: 900, take: 10}, {ms: 1900, take: 10}, {ms: 2000, back: true}, {ms: 2100, ask: 20, want: 2}}},
		{"GCRA refilled since the charge", core.GCRA, []step{
			{ms: 900, take: 10}, {ms: 1900, take: 10}, {ms: 2000, back: true}, {ms: 2100, ask: 20, want: 2}}},
		// Full at 0.9 s when 6 are taken: by 1 s, without them, the bucket
		// would have stayed full and wasted 1 unit of refill. Undoing them
		// gives 5 back, and 5 pass: as had they never been taken.
		{"a token bucket full at the charge", core.TokenBucket, []step{
			{ms: 900, take: 6}, {ms: 1000, take: 5}, {ms: 1000, back: true}, {ms: 1000, ask: 20, want: 5}}},
		{"GCRA full at the charge", core.GCRA, []step{
			{ms: 900, take: 6}, {ms: 1000, take: 5}, {ms: 1000, back: true}, {ms: 1000, ask: 20, want: 5}}},
		// A busy bucket (4 used before the charge of 6): the charge is
		// given back whole, 0.3 s later, and 6 + 3 refilled pass.
		{"a token bucket busy since the charge", core.TokenBucket, []step{
			{ms: 900, take: 4}, {ms: 900, take: 6, charge: true}, {ms: 1200, back: true}, {ms: 1200, ask: 20, want: 9}}},
		{"GCRA busy since the charge", core.GCRA, []step{
			{ms: 900, take: 4}, {ms: 900, take: 6, charge: true}, {ms: 1200, back: true}, {ms: 1200, ask: 20, want: 9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &clockAt{}
			l := core.Per(10, time.Second).WithAlgorithm(tc.alg)
			if tc.alg == core.BucketedWindow {
				l.Precision = 100 * time.Millisecond
			}
			lim := limiter(t, l, clock)
			var first core.Decision
			for i, s := range tc.steps {
				clock.t = at(s.ms)
				switch {
				case s.take > 0 && (i == 0 || s.charge):
					first = take(t, lim, "k", s.take)
				case s.take > 0:
					take(t, lim, "k", s.take)
				case s.back:
					refund(t, lim, "k", first, first.Cost)
				default:
					if got := admit(t, lim, "k", s.ask); got != s.want {
						t.Errorf("step %d at %d ms: %d of %d admitted, want %d", i, s.ms, got, s.ask, s.want)
					}
				}
			}
		})
	}

	// Randomized: a charge refunded later, with traffic around it, never
	// leaves more room than had the charge never been made. The oracle
	// runs the same requests on another key without the charge.
	t.Run("never more room than without the charge", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(21, 21))
		for i := range 24 {
			alg := core.Algorithm(rng.IntN(6)) // every algorithm but Concurrency
			if alg == core.LeakyBucket {
				alg = core.GCRA
			}
			l := core.Per(int64(2+rng.IntN(9)), time.Second).WithAlgorithm(alg)
			if alg == core.BucketedWindow {
				l.Precision = 100 * time.Millisecond
			}
			clock := &clockAt{at(rng.IntN(1000))}
			lim := limiter(t, l, clock)
			with, without := fmt.Sprintf("with-%d", i), fmt.Sprintf("without-%d", i)
			cost := int64(1 + rng.IntN(int(l.Quota)))
			d, err := lim.AllowN(ctx, with, cost)
			if err != nil || !d.Allowed {
				t.Fatalf("AllowN(%d) = %+v, %v", cost, d, err)
			}
			// Traffic on the key, the refund, then probes. The oracle key
			// is charged what the traffic had admitted, at the same times,
			// without the refunded charge: the state had it never been
			// made.
			ts := clock.t
			for range 1 + rng.IntN(6) {
				clock.t = clock.t.Add(time.Duration(rng.IntN(700)) * time.Millisecond)
				n := int64(1 + rng.IntN(3))
				d, err := lim.AllowN(ctx, with, n)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					if _, err := lim.Charge(ctx, without, n); err != nil {
						t.Fatal(err)
					}
				}
			}
			clock.t = clock.t.Add(time.Duration(rng.IntN(2500)) * time.Millisecond)
			if _, err := lim.RefundTo(ctx, with, d.Receipt(), cost); err != nil {
				t.Fatal(err)
			}
			gotWith, gotWithout := admit(t, lim, with, int(l.Quota)+2), admit(t, lim, without, int(l.Quota)+2)
			if gotWith > gotWithout {
				t.Errorf("trace %d (%v, cost %d refunded after %v): %d admitted, more than the %d without the charge", i, l, cost, clock.t.Sub(ts), gotWith, gotWithout)
			}
		}
	})
}
