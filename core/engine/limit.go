package engine

import (
	"fmt"
	"math/bits"
	"strconv"
	"time"
)

// Bounds that Compile enforces. They keep every intermediate product of
// the algorithms below 2^53, so that an in-process store (int64) and a port
// to a language whose numbers are doubles (the Redis store's Lua) compute
// bit-identical decisions. core re-exports them.
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
	// which weighs two), up to one rounding unit more on a coarse tick;
	// beyond that it saturates. Overage on FixedWindow, SlidingLog and
	// BucketedWindow is forgiven when its window or entries expire;
	// TokenBucket, GCRA and LeakyBucket repay it at Q per P.
	DebtFactor = 64

	// productBound is the bound on capacity × period-in-ticks.
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
	// Tick is the time unit of SlidingWindow, TokenBucket, GCRA and
	// LeakyBucket, in µs: 1 unless Capacity × Period is above 2^47, then a
	// power of ten up to 1s. PeriodTicks is Period in ticks.
	Tick, PeriodTicks int64
	// qTick and qRest are Quota ÷ Tick and Quota mod Tick: the refill per
	// tick in whole units and the rest, which the refill since a coarse
	// tick is computed with (shape.since), divided once here.
	qTick, qRest int64
	// Precision is the BucketedWindow bucket size in µs and Buckets the
	// number of buckets per Period; 0 for the other algorithms.
	Precision, Buckets int64
	// Ident identifies the layout of the limit's state (State.Ident):
	// algorithm, period and time unit (or bucket count). A state stored
	// under another Ident is discarded and starts fresh, so changing a
	// limit's Quota or Burst keeps its usage, while changing its Algorithm,
	// Period or Precision starts afresh. Never 0; it may exceed 2^53, so
	// ports compare it as a string or in halves.
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
	}
	l.Algorithm, l.Quota, l.Capacity = s.Algorithm, s.Quota, s.Quota
	if s.Algorithm.rated() && s.Burst > 0 {
		l.Capacity = s.Burst
	}
	l.Period = int64(s.Period) / 1000
	l.Tick, l.PeriodTicks = 1, l.Period
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
		// Products capacity × period must stay under productBound; long
		// periods with large quotas compute in a coarser time unit.
		if hi, lo := bits.Mul64(uint64(l.Capacity), uint64(l.Period)); hi == 0 && lo <= productBound {
			break // the common case: microseconds
		}
		for l.Tick = 10; ; l.Tick *= 10 {
			if l.Tick > 1_000_000 {
				return Limit{}, s.invalid("capacity %d × period %v is too large to compute exactly", l.Capacity, s.Period)
			}
			if l.Period%l.Tick != 0 {
				continue
			}
			l.PeriodTicks = l.Period / l.Tick
			if hi, lo := bits.Mul64(uint64(l.Capacity), uint64(l.PeriodTicks)); hi == 0 && lo <= productBound {
				break
			}
		}
		if l.Algorithm.rated() {
			// A full debt (DebtFactor × capacity) drains in
			// DebtFactor·⌈cap/q⌉ periods: keep that wait within maxDrain,
			// so waits stay exact (below 2^53 µs) and fit a Duration.
			if drain := ceilDiv(l.Capacity, l.Quota); drain > maxDrain/DebtFactor/l.Period {
				return Limit{}, s.invalid("burst %d drains at %d per %v: a full debt would take longer than %v", l.Capacity, l.Quota, s.Period, time.Duration(maxDrain)*time.Microsecond)
			}
		}
	}
	l.qTick, l.qRest = l.Quota/l.Tick, l.Quota%l.Tick
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

// ident computes Ident: algorithm, period and time unit (or bucket count).
func (l *Limit) ident() uint64 {
	var x int64 // bucket count (≤ MaxBuckets), or log10 of the tick (≤ 6)
	if l.Algorithm == BucketedWindow {
		x = l.Buckets
	} else {
		for t := l.Tick; t > 1; t /= 10 {
			x++
		}
	}
	return uint64(l.Algorithm+1) | uint64(x)<<4 | uint64(l.Period)<<16 // Period < 2^46
}
