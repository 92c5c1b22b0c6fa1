package engine

import (
	"fmt"
	"math/bits"
	"strconv"
	"time"
)

// Bounds that Compile enforces. They keep every stored value and every
// quotient the algorithms compute below 2^53, so that an in-process store
// (int64) and a port to a language whose numbers are doubles (the Redis
// store's Lua) compute bit-identical decisions; products that may pass
// 2^53 (a wide limit's, see Limit.Wide) are computed exactly, in 128 bits
// in Go and by an exact routine in Lua. core re-exports them.
const (
	// MaxPeriod is the longest Period: 400 days.
	MaxPeriod = 400 * 24 * time.Hour
	// MaxQuota is the largest Quota or Burst: 2^47.
	MaxQuota = 1 << 47
	// MaxBuckets is the largest Period/Precision of a BucketedWindow.
	MaxBuckets = 1024
	// MaxLogQuota is the largest Quota of a SlidingLog or a Concurrency
	// limit, whose memory grows with it: one entry per admitted request.
	MaxLogQuota = 1 << 16
	// DebtFactor bounds post-hoc overage: Charge can push a limit's usage to
	// at most DebtFactor times its capacity (per window, for SlidingWindow,
	// which weighs two); beyond that it saturates. Overage on FixedWindow, SlidingLog and
	// BucketedWindow is forgiven when its window or entries expire;
	// TokenBucket, GCRA and LeakyBucket repay it at Q per P.
	DebtFactor = 64

	// productBound is the bound on capacity × period (µs) of a limit that
	// is not wide: its products, at most DebtFactor times that, stay
	// within 2^53.
	productBound = 1 << 47
	// maxDrain bounds, in µs, how long the largest debt of a rated limit
	// takes to drain: about 71 years.
	maxDrain = 1 << 51
)

// Spec is a limit as its user wrote it (core.Limit's numbers): what
// Compile compiles. Name only labels error messages.
type Spec struct {
	Name      string
	Algorithm Algorithm
	Quota     int64
	Period    time.Duration
	Burst     int64 // 0: Quota
	Precision time.Duration
}

// Limit is a limit compiled to the integer units the algorithms compute in:
// what Step decides with, and what a port of Step to another language
// receives (the Redis store writes these numbers into its scripts, so that
// the port makes no choice of its own). Every value is below 2^53.
type Limit struct {
	Algorithm Algorithm
	Quota     int64 // Q, cost units per Period
	Capacity  int64 // the most cost that can pass at once: Burst (default Quota) for the rated algorithms, Quota for the others
	Period    int64 // P in µs
	// Wide is set for a SlidingWindow, TokenBucket, GCRA or LeakyBucket
	// limit whose Capacity × Period is above 2^47: its products (usage ×
	// period, up to DebtFactor × 2^47 × 2^45) may pass 2^53, so they are
	// computed exactly in 128 bits (the Redis store's Lua takes an exact
	// routine on this rare path only). Every decision is still exact, in
	// 1µs: there is no coarser time unit. A wide TokenBucket keeps its
	// state as GCRA does (a token bucket and GCRA are one machine), since
	// tokens × period no longer fits its register.
	Wide bool
	// Precision is the BucketedWindow bucket size in µs and Buckets the
	// number of buckets per Period; 0 for the other algorithms.
	Precision, Buckets int64
	// Ident identifies the layout of the limit's state (State.Ident):
	// algorithm, period and bucket count (or a wide TokenBucket's layout). A state stored
	// under another Ident is discarded and starts fresh, so changing a
	// limit's Quota or Burst keeps its state (but a TokenBucket's that
	// becomes wide or stops being wide), while changing its Algorithm,
	// Period or Precision starts afresh. What a kept state means under the
	// new numbers depends on what it holds. The windows and logs hold the
	// units used, which stay used (3 used of 5 leave 7 of 10). A narrow
	// TokenBucket holds the tokens left, which stay left, at most the new
	// burst (2 of 10). GCRA, LeakyBucket and a wide TokenBucket hold a
	// time, when the key is full again, which stays, and the units it
	// stands for scale with the new rate (3 used of 5 per second are 6
	// used of 10: 4 left). Never 0; it may exceed 2^53, so ports compare it
	// as a string or in halves.
	Ident uint64
}

// Compile validates s and compiles it. The error wraps ErrInvalidLimit and
// says what is wrong. It does not check Name, which no computation reads.
func Compile(s Spec) (Limit, error) {
	var l Limit
	switch {
	case s.Algorithm >= numAlgorithms:
		return l, s.invalid("unknown algorithm %d", s.Algorithm)
	case s.Quota < 1:
		return l, s.invalid("quota %d must be at least 1", s.Quota)
	case s.Quota > MaxQuota:
		return l, s.invalid("quota %d exceeds %d", s.Quota, int64(MaxQuota))
	case s.Period < time.Microsecond:
		return l, s.invalid("period %v must be at least 1µs", s.Period)
	case s.Period > MaxPeriod:
		return l, s.invalid("period %v exceeds %v", s.Period, MaxPeriod)
	case s.Period%time.Microsecond != 0:
		return l, s.invalid("period %v is not a whole number of microseconds", s.Period)
	case s.Burst < 0:
		return l, s.invalid("burst %d must be at least 1 (or 0 for the default, Quota)", s.Burst)
	case s.Burst > MaxQuota:
		return l, s.invalid("burst %d exceeds %d", s.Burst, int64(MaxQuota))
	case s.Burst > 0 && !s.Algorithm.rated():
		// Ignored, it would leave a limit more permissive than it reads:
		// PerSecond(10).WithBurst(5) on the default sliding window admits
		// 10 at once. The algorithm was meant to be set, or the burst not.
		return l, s.invalid("burst applies to token-bucket, gcra and leaky-bucket, not %v: set the algorithm, or drop the burst", s.Algorithm)
	case s.Precision != 0 && s.Algorithm != BucketedWindow:
		return l, s.invalid("precision applies to bucketed-window, not %v: set the algorithm, or drop the precision", s.Algorithm)
	}
	l.Algorithm, l.Quota, l.Capacity = s.Algorithm, s.Quota, s.Quota
	if s.Algorithm.rated() && s.Burst > 0 {
		l.Capacity = s.Burst
	}
	l.Period = int64(s.Period) / 1000
	switch l.Algorithm {
	case SlidingLog:
		if l.Quota > MaxLogQuota {
			return Limit{}, s.invalid("sliding-log quota %d exceeds %d; use sliding-window or bucketed-window", l.Quota, MaxLogQuota)
		}
	case Concurrency:
		if l.Quota > MaxLogQuota {
			return Limit{}, s.invalid("concurrency quota %d exceeds %d units in flight", l.Quota, MaxLogQuota)
		}
	case BucketedWindow:
		prec := s.Precision
		if prec == 0 {
			prec = s.Period / 10
			if prec%time.Microsecond != 0 || prec == 0 {
				return Limit{}, s.invalid("period %v has no default precision; set Precision", s.Period)
			}
		}
		switch {
		case prec < 0:
			return Limit{}, s.invalid("precision %v is negative", prec)
		case prec > s.Period || s.Period%prec != 0 || prec%time.Microsecond != 0:
			return Limit{}, s.invalid("precision %v does not divide period %v into whole microsecond buckets", prec, s.Period)
		case s.Period/prec > MaxBuckets:
			return Limit{}, s.invalid("period %v / precision %v is more than %d buckets", s.Period, prec, MaxBuckets)
		}
		l.Precision = int64(prec / time.Microsecond)
		l.Buckets = l.Period / l.Precision
	case SlidingWindow, TokenBucket, GCRA, LeakyBucket:
		// Products capacity × period above productBound may pass 2^53:
		// they are computed exactly, on the wide path.
		if hi, lo := bits.Mul64(uint64(l.Capacity), uint64(l.Period)); hi != 0 || lo > productBound {
			l.Wide = true
		}
		if l.Algorithm.rated() {
			// A full debt (DebtFactor × capacity) drains in
			// DebtFactor·⌈cap/q⌉ periods: keep that wait within maxDrain,
			// so waits and theoretical arrival times stay exact (below
			// 2^53 µs) and fit a Duration.
			if drain := ceilDiv(l.Capacity, l.Quota); drain > maxDrain/DebtFactor/l.Period {
				return Limit{}, s.invalid("burst %d drains at %d per %v: a full debt would take longer than %v", l.Capacity, l.Quota, s.Period, time.Duration(maxDrain)*time.Microsecond)
			}
		}
	}
	l.Ident = l.ident()
	return l, nil
}

func (s *Spec) invalid(format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrInvalidLimit, s.debugName(), fmt.Sprintf(format, args...))
}

// debugName names s in an error: its name when it is printable, else its
// numbers.
func (s *Spec) debugName() string {
	if s.Name != "" && len(s.Name) <= 128 && printable(s.Name) {
		return strconv.Quote(s.Name)
	}
	return fmt.Sprintf("{Quota: %d, Period: %v}", s.Quota, s.Period)
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// ident computes Ident: algorithm, period and layout (bucket count, or
// the wide TokenBucket's GCRA layout). Before Tollgate computed wide
// limits exactly, x held log10 of a coarse time unit (1 to 6) for them:
// their states, of another Ident, start afresh once.
func (l *Limit) ident() uint64 {
	var x int64 // bucket count (≤ MaxBuckets), or tatLayout
	switch {
	case l.Algorithm == BucketedWindow:
		x = l.Buckets
	case l.tat() && l.Algorithm == TokenBucket:
		x = tatLayout
	}
	return uint64(l.Algorithm+1) | uint64(x)<<4 | uint64(l.Period)<<16 // Period < 2^46
}

// tatLayout is ident's x of a wide TokenBucket, which keeps GCRA's
// registers: above the 1 to 6 that coarse time units once used.
const tatLayout = 7

// tat reports whether the limit keeps a theoretical arrival time (GCRA's
// registers): GCRA, LeakyBucket, and a wide TokenBucket.
func (l *Limit) tat() bool {
	return l.Algorithm == GCRA || l.Algorithm == LeakyBucket || l.Algorithm == TokenBucket && l.Wide
}
