package core

import (
	"fmt"
	"math/bits"
	"strconv"
	"time"
)

// Bounds that Validate enforces. With the choice of a time unit (see the
// package doc) they keep the algorithms' values within 2^53, so the
// in-memory store (int64) and the Redis store (Lua doubles) compute
// bit-identical decisions.
const (
	// MaxPeriod is the longest Period: 400 days.
	MaxPeriod = 400 * 24 * time.Hour
	// MaxQuota is the largest Quota or Burst: 2^47.
	MaxQuota = 1 << 47
	// MaxBuckets is the largest Period/Precision of a BucketedWindow.
	MaxBuckets = 1024
	// MaxLogQuota is the largest Quota of a SlidingLog, whose memory grows
	// with it: one entry per admitted request.
	MaxLogQuota = 1 << 16
	// MaxNameLen is the longest Limit name, in bytes.
	MaxNameLen = 128
	// DebtFactor bounds post-hoc overage: Charge can push a limit's usage to
	// at most DebtFactor times its capacity (per window, for SlidingWindow,
	// which weighs two); beyond that it saturates. Overage on FixedWindow,
	// SlidingLog and BucketedWindow is forgiven when its window or entries
	// expire; TokenBucket, GCRA and LeakyBucket repay it at Q per P.
	DebtFactor = 64

	// productBound is the bound on capacity × period-in-ticks.
	productBound = 1 << 47
	// maxDrain bounds, in µs, how long the largest debt of a rated limit
	// takes to drain: about 71 years.
	maxDrain = 1 << 51
)

// A Limit allows Quota cost units per Period, counted by Algorithm.
// Limits are plain values: compare them with ==, pass them per call.
type Limit struct {
	// Name is the policy name sent in RateLimit-Policy. It must be printable
	// ASCII, at most MaxNameLen bytes. Default: derived from Quota and
	// Period, e.g. "100-per-1m" (see PolicyName).
	Name string
	// Quota is the number of cost units allowed per Period (q in the IETF
	// header). It must be at least 1.
	Quota int64
	// Period is the window length (w). It must be a whole number of
	// microseconds, at least 1µs and at most MaxPeriod.
	Period time.Duration
	// Burst is the capacity of TokenBucket, GCRA and LeakyBucket: the cost
	// that can pass at once after a quiet spell. Other algorithms ignore it.
	// Default (0): Quota.
	Burst int64
	// Precision is the bucket size of BucketedWindow; Period must be a whole
	// multiple of it, with at most MaxBuckets buckets. Other algorithms
	// ignore it. Default (0): Period/10.
	Precision time.Duration
	// Algorithm selects the counting method. Default: SlidingWindow.
	Algorithm Algorithm
}

// Per returns a limit of n units per period d, counted by SlidingWindow.
func Per(n int64, d time.Duration) Limit { return Limit{Quota: n, Period: d} }

// PerSecond is shorthand for Per(n, time.Second).
func PerSecond(n int64) Limit { return Per(n, time.Second) }

// PerMinute is shorthand for Per(n, time.Minute).
func PerMinute(n int64) Limit { return Per(n, time.Minute) }

// PerHour is shorthand for Per(n, time.Hour).
func PerHour(n int64) Limit { return Per(n, time.Hour) }

// PerDay is shorthand for Per(n, 24*time.Hour).
func PerDay(n int64) Limit { return Per(n, 24*time.Hour) }

// Every is shorthand for Per(1, d): one unit every d.
func Every(d time.Duration) Limit { return Per(1, d) }

// WithBurst returns a copy of l with Burst b.
func (l Limit) WithBurst(b int64) Limit { l.Burst = b; return l }

// WithAlgorithm returns a copy of l counted by a.
func (l Limit) WithAlgorithm(a Algorithm) Limit { l.Algorithm = a; return l }

// WithPrecision returns a copy of l with BucketedWindow bucket size p.
func (l Limit) WithPrecision(p time.Duration) Limit { l.Precision = p; return l }

// Named returns a copy of l with Name name.
func (l Limit) Named(name string) Limit { l.Name = name; return l }

// Capacity returns the most cost that can pass at once: Burst (default
// Quota) for TokenBucket, GCRA and LeakyBucket, Quota for the others.
// A cost above Capacity is never allowed.
func (l Limit) Capacity() int64 {
	if l.Algorithm.rated() && l.Burst > 0 {
		return l.Burst
	}
	return l.Quota
}

// PolicyName returns Name, or when it is empty a name derived from Quota
// and Period: "100-per-1m", "10-per-1s", "5000-per-1d", "3-per-90s".
func (l Limit) PolicyName() string {
	if l.Name != "" {
		return l.Name
	}
	return strconv.FormatInt(l.Quota, 10) + "-per-" + shortDuration(l.Period)
}

// String returns a readable form, e.g. "100-per-1m (sliding-window)".
func (l Limit) String() string {
	return l.PolicyName() + " (" + l.Algorithm.String() + ")"
}

func shortDuration(d time.Duration) string {
	units := []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}}
	for _, u := range units {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// Validate reports whether l is usable, with an error that wraps
// ErrInvalidLimit and says what is wrong.
func (l Limit) Validate() error {
	if err := l.validateName(); err != nil {
		return err
	}
	var sh shape
	return l.compile(&sh)
}

func (l *Limit) validateName() error {
	switch {
	case len(l.Name) > MaxNameLen:
		return l.invalid("name is %d bytes long, more than %d", len(l.Name), MaxNameLen)
	case !isPrintableASCII(l.Name):
		return l.invalid("name %q is not printable ASCII", l.Name)
	}
	return nil
}

func (l *Limit) invalid(format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrInvalidLimit, l.debugName(), fmt.Sprintf(format, args...))
}

func (l *Limit) debugName() string {
	if l.Name != "" && isPrintableASCII(l.Name) && len(l.Name) <= MaxNameLen {
		return strconv.Quote(l.Name)
	}
	return fmt.Sprintf("{Quota: %d, Period: %v}", l.Quota, l.Period)
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// shape is a Limit in the integer units the algorithms compute in.
type shape struct {
	alg  Algorithm
	q    int64 // Quota
	cap  int64 // Capacity
	p    int64 // Period in µs
	tick int64 // time unit of the rated algorithms and SlidingWindow, µs
	pt   int64 // Period in ticks
	prec int64 // BucketedWindow bucket size, µs
	n    int64 // BucketedWindow bucket count
	id   uint64

	// Position of the current call, set by roll.
	tt int64 // now in ticks, rounded down
	e  int64 // SlidingWindow: ticks elapsed in window st.A
	rc int64 // rated algorithms: refill since tick tt, rounded up (see since)
}

// compile validates l's numbers and converts them to integer units. It does
// not check Name, which no computation reads (Validate does).
func (l *Limit) compile(s *shape) error {
	switch {
	case l.Algorithm >= numAlgorithms:
		return l.invalid("unknown algorithm %d", l.Algorithm)
	case l.Quota < 1:
		return l.invalid("quota %d must be at least 1", l.Quota)
	case l.Quota > MaxQuota:
		return l.invalid("quota %d exceeds %d", l.Quota, int64(MaxQuota))
	case l.Period < time.Microsecond:
		return l.invalid("period %v must be at least 1µs", l.Period)
	case l.Period > MaxPeriod:
		return l.invalid("period %v exceeds %v", l.Period, MaxPeriod)
	case l.Period%time.Microsecond != 0:
		return l.invalid("period %v is not a whole number of microseconds", l.Period)
	case l.Burst < 0:
		return l.invalid("burst %d must be at least 1 (or 0 for the default, Quota)", l.Burst)
	case l.Burst > MaxQuota:
		return l.invalid("burst %d exceeds %d", l.Burst, int64(MaxQuota))
	}
	s.alg, s.q, s.cap = l.Algorithm, l.Quota, l.Capacity()
	s.p = int64(l.Period) / 1000
	s.tick, s.pt, s.prec, s.n = 1, s.p, 0, 0
	switch s.alg {
	case SlidingLog:
		if s.q > MaxLogQuota {
			return l.invalid("sliding-log quota %d exceeds %d; use sliding-window or bucketed-window", s.q, MaxLogQuota)
		}
	case BucketedWindow:
		prec := l.Precision
		if prec == 0 {
			prec = l.Period / 10
			if prec%time.Microsecond != 0 || prec == 0 {
				return l.invalid("period %v has no default precision; set Precision", l.Period)
			}
		}
		switch {
		case prec < 0:
			return l.invalid("precision %v is negative", prec)
		case prec > l.Period || l.Period%prec != 0 || prec%time.Microsecond != 0:
			return l.invalid("precision %v does not divide period %v into whole microsecond buckets", prec, l.Period)
		case l.Period/prec > MaxBuckets:
			return l.invalid("period %v / precision %v is more than %d buckets", l.Period, prec, MaxBuckets)
		}
		s.prec = int64(prec / time.Microsecond)
		s.n = s.p / s.prec
	case SlidingWindow, TokenBucket, GCRA, LeakyBucket:
		// Products capacity × period must stay under productBound; long
		// periods with large quotas compute in a coarser time unit, rounded
		// never to be more permissive than exact (see roll and since).
		if hi, lo := bits.Mul64(uint64(s.cap), uint64(s.p)); hi == 0 && lo <= productBound {
			break // the common case: microseconds
		}
		for s.tick = 10; ; s.tick *= 10 {
			if s.tick > 1_000_000 {
				return l.invalid("capacity %d × period %v is too large to compute exactly", s.cap, l.Period)
			}
			if s.p%s.tick != 0 {
				continue
			}
			s.pt = s.p / s.tick
			if hi, lo := bits.Mul64(uint64(s.cap), uint64(s.pt)); hi == 0 && lo <= productBound {
				break
			}
		}
		if s.alg.rated() {
			// A full debt (DebtFactor × capacity) drains in
			// DebtFactor·⌈cap/q⌉ periods: keep that wait within maxDrain,
			// so waits stay exact (below 2^53 µs) and fit a Duration.
			if drain := ceilDiv(s.cap, s.q); drain > maxDrain/DebtFactor/s.p {
				return l.invalid("burst %d drains at %d per %v: a full debt would take longer than %v", s.cap, s.q, l.Period, time.Duration(maxDrain)*time.Microsecond)
			}
		}
	}
	s.id = s.ident()
	return nil
}

// ident identifies the layout of a limit's state: algorithm, period and time
// unit (or bucket count). A state written under another ident is discarded,
// so changing a key's Quota or Burst keeps its usage while changing its
// Algorithm, Period or Precision starts afresh. Never 0.
func (s *shape) ident() uint64 {
	var x int64 // bucket count (≤ MaxBuckets), or log10 of the tick (≤ 6)
	if s.alg == BucketedWindow {
		x = s.n
	} else {
		for t := s.tick; t > 1; t /= 10 {
			x++
		}
	}
	return uint64(s.alg+1) | uint64(x)<<4 | uint64(s.p)<<16 // p < 2^46
}
