package core

import (
	"fmt"

	"github.com/tollgate/tollgate/core/engine"
)

// Algorithm selects how a Limit counts. The zero value is SlidingWindow.
// Each algorithm's math is documented on its constant and implemented as a
// pure function of (state, now, cost) shared by every store.
type Algorithm uint8

const (
	// SlidingWindow is the sliding window counter (Cloudflare's): it keeps the
	// count of the current and the previous epoch-aligned window and admits a
	// cost c at elapsed time e into the current window when
	//
	//	prev·(P−e) + (cur+c)·P ≤ Q·P
	//
	// that is, when the previous window's count weighted by the part of it
	// still inside the sliding window, plus the current count, plus c, is at
	// most Q. The comparison is done in integers, so it is exact, for every
	// limit (beyond 2^53, in 128 bits). O(1) memory.
	//
	// Under saturation (requests arriving without pause, each period full)
	// it admits Q−1 per period, not Q: the previous window's weight,
	// prev·(P−e), is above zero until the current window ends, so the
	// current count stops one short of Q, and the next window starts from
	// a previous count of Q−1 (Q = 1: one every other period). A limit
	// that must pass exactly Q a period under a sustained overload is a
	// FixedWindow, SlidingLog, TokenBucket or GCRA one.
	SlidingWindow Algorithm = iota

	// FixedWindow counts per epoch-aligned window [k·P, (k+1)·P) and admits c
	// when count + c ≤ Q. Every instance agrees on the windows. It allows up
	// to 2·Q across a window boundary.
	FixedWindow

	// SlidingLog keeps one (timestamp, cost) entry per admitted request and
	// admits c when the costs of the entries younger than P, plus c, are at
	// most Q. Exact, but memory grows with Quota (at most MaxLogQuota).
	SlidingLog

	// BucketedWindow divides time into epoch-aligned buckets of Precision p
	// and admits c when the counts of the last ⌈P/p⌉ buckets (the current one
	// included), plus c, are at most Q. Exact at bucket granularity, memory
	// bounded by P/p buckets; with p = P it is FixedWindow.
	BucketedWindow

	// TokenBucket holds up to B tokens (B = Burst, default Q), starts full and
	// refills at Q per P: tokens(t) = min(B, tokens + (t−last)·Q/P). It admits
	// c when tokens(t) ≥ c and then removes c. Its decisions are those of
	// golang.org/x/time/rate's AllowN(t, c) with r = Q/P and b = B, computed
	// exactly instead of in floating point, for every limit (see the package
	// doc).
	TokenBucket

	// GCRA is the generic cell rate algorithm: with emission interval T = P/Q
	// and theoretical arrival time TAT, it admits c when
	//
	//	max(TAT, t) + c·T − B·T ≤ t
	//
	// and then sets TAT = max(TAT, t) + c·T. It decides exactly as
	// TokenBucket does (the two are the same machine in different state)
	// and as go-redis/redis_rate for Limit{Rate: Q, Period: P, Burst: B},
	// exactly.
	GCRA

	// LeakyBucket is the leaky bucket as a queue: requests join a queue of
	// capacity B·T that drains at Q per P. It admits c under GCRA's condition,
	// and an admitted request is served after Decision.Delay =
	// max(TAT−t, 0), so that requests leave at exactly Q per P. Middleware
	// waits out the delay instead of passing at once.
	LeakyBucket

	// Concurrency counts units in flight, not over time: Quota is how many
	// may be held at once, and Period how long an acquisition lasts at most
	// (its lease). An allowed Take acquires its cost until Release ends it,
	// or until its lease runs out, so that a holder that died (a crashed
	// process, a hung handler) blocks no key for ever: it admits c when the
	// costs of the live acquisitions, plus c, are at most Q. Decision.Lease
	// identifies the acquisition for Limiter.Release, which is idempotent.
	// It joins the all-or-nothing decision of several limits like any
	// other (10 per second and 3 at a time). Charge and Refund leave it
	// alone. Memory grows with Quota (at most MaxLogQuota). The quota unit
	// of draft-11 for it is "concurrent-requests". A lease is the time of
	// its acquisition in µs, or one µs after the key's newest lease when
	// that is not earlier (acquisitions in one µs), so that no lease is
	// issued twice on a key: such an acquisition lasts a µs longer.
	Concurrency

	numAlgorithms
)

// String returns the algorithm's name, e.g. "sliding-window".
func (a Algorithm) String() string { return engine.Algorithm(a).String() }

// MarshalText returns the algorithm's name, as String does.
func (a Algorithm) MarshalText() ([]byte, error) {
	if a >= numAlgorithms {
		return nil, fmt.Errorf("%w: unknown algorithm %d", ErrInvalidLimit, int(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText sets a to the algorithm text names, ignoring case, '-' and
// '_' ("gcra", "TokenBucket", "sliding_window"), as ParseLimits reads it:
// configuration formats (JSON, YAML, flags) can then decode an Algorithm
// by its name. An unknown name is an error wrapping ErrInvalidLimit.
func (a *Algorithm) UnmarshalText(text []byte) error {
	named, ok := algorithmNamed(string(text))
	if !ok {
		return fmt.Errorf("%w: %q is not an algorithm (want %s)", ErrInvalidLimit, text, algorithmList())
	}
	*a = named
	return nil
}

// Algorithms lists every algorithm, in declaration order.
func Algorithms() []Algorithm {
	all := make([]Algorithm, numAlgorithms)
	for i := range all {
		all[i] = Algorithm(i)
	}
	return all
}

// rated reports whether the algorithm refills continuously at Q per P
// (TokenBucket, GCRA, LeakyBucket): those use Burst.
func (a Algorithm) rated() bool { return a == TokenBucket || a == GCRA || a == LeakyBucket }

// HasBurst reports whether a limit of a takes a Burst: TokenBucket, GCRA
// and LeakyBucket do; on any other algorithm a Burst is invalid (see
// Limit.Burst). Code that builds limits of an algorithm chosen elsewhere
// sets a burst only when it holds:
//
//	l := core.PerSecond(100).WithAlgorithm(alg)
//	if alg.HasBurst() {
//		l = l.WithBurst(20)
//	}
func (a Algorithm) HasBurst() bool { return a.rated() }
