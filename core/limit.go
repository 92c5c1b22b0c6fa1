package core

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/core/engine"
)

// Bounds that Validate enforces. They keep every intermediate product of the
// algorithms below 2^53, so the in-memory store (int64) and the Redis store
// (Lua doubles) compute bit-identical decisions.
const (
	// MaxPeriod is the longest Period: 400 days.
	MaxPeriod = engine.MaxPeriod
	// MaxQuota is the largest Quota or Burst: 2^47.
	MaxQuota = engine.MaxQuota
	// MaxBuckets is the largest Period/Precision of a BucketedWindow.
	MaxBuckets = engine.MaxBuckets
	// MaxLogQuota is the largest Quota of a SlidingLog, whose memory grows
	// with it: one entry per admitted request.
	MaxLogQuota = engine.MaxLogQuota
	// MaxNameLen is the longest Limit or Limiter name, in bytes.
	MaxNameLen = engine.MaxScopeLen
	// DebtFactor bounds post-hoc overage: Charge can push a limit's usage to
	// at most DebtFactor times its capacity (per window, for SlidingWindow,
	// which weighs two); beyond that it saturates. Overage on FixedWindow, SlidingLog and
	// BucketedWindow is forgiven when its window or entries expire;
	// TokenBucket, GCRA and LeakyBucket repay it at Q per P.
	DebtFactor = engine.DebtFactor
)

// A Limit allows Quota cost units per Period, counted by Algorithm.
// Limits are plain values: compare them with ==, pass them per call.
type Limit struct {
	// Name is the policy name sent in RateLimit-Policy. It must be printable
	// ASCII, at most MaxNameLen bytes, and differ from the names of the
	// other limits of its Limiter (or of the set a WithLimitsFunc returns):
	// the headers tell limits apart by name. Two limits of one rate, such as
	// PerMinute(10) and PerMinute(10).WithAlgorithm(GCRA), derive one name:
	// New rejects them, and WithLimitsFunc names the later ones apart (see
	// there). Default: derived from Quota and Period, e.g. "100-per-1m" (see
	// PolicyName).
	Name string
	// Quota is the number of cost units allowed per Period (q in the IETF
	// header). It must be at least 1.
	Quota int64
	// Period is the window length (w). It must be a whole number of
	// microseconds, at least 1µs and at most MaxPeriod.
	Period time.Duration
	// Burst is the capacity of TokenBucket, GCRA and LeakyBucket: the cost
	// that can pass at once after a quiet spell. Default (0): Quota. On any
	// other algorithm (see Algorithm.HasBurst) a Burst is invalid: ignored,
	// PerSecond(10).WithBurst(5) on the default sliding window would admit
	// 10 at once, not the 5 it reads.
	Burst int64
	// Precision is the bucket size of BucketedWindow; Period must be a whole
	// multiple of it, with at most MaxBuckets buckets. Default (0):
	// Period/10. On any other algorithm a Precision is invalid.
	Precision time.Duration
	// Algorithm selects the counting method. Default: SlidingWindow.
	Algorithm Algorithm
	// Unit is the quota unit: what one cost unit counts, sent as the qu
	// parameter of RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers),
	// e.g. "content-bytes" (registered by the draft, with "requests" and
	// "concurrent-requests") or a unit of your own such as "tokens", which
	// clients may not know. It must be an sf-token of at most MaxUnitLen
	// bytes: a letter or '*', then letters, digits and
	// !#$%&'*+-.^_`|~:/. It is part of the limit's identity (its default
	// name, and the default scope of a Limiter) but not of its stored
	// state: renaming the unit of a named Limiter keeps its usage.
	// Default: "", requests, and no qu parameter.
	Unit string
}

// MaxUnitLen is the longest Unit, in bytes.
const MaxUnitLen = 64

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

// InFlight returns a Concurrency limit: at most n units in flight at once,
// an acquisition lasting until Limiter.Release or, at the latest, lease.
// Choose lease longer than the slowest request you serve (a handler's
// timeout, say): it only matters when a holder never releases. A denial
// by such a limit reports, as RetryAfter, the time until enough held
// leases run out to free the denied cost: the worst case, since units
// usually come back as soon as their requests end.
func InFlight(n int64, lease time.Duration) Limit {
	return Limit{Quota: n, Period: lease, Algorithm: Concurrency}
}

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

// WithUnit returns a copy of l whose cost units count unit, e.g.
// core.PerMinute(10_000).WithUnit("tokens").
func (l Limit) WithUnit(unit string) Limit { l.Unit = unit; return l }

// QuotaUnit returns the quota unit headers send for l (draft-11's qu):
// Unit, or for a Concurrency limit without one "concurrent-requests";
// "" means requests, the draft's default.
func (l Limit) QuotaUnit() string {
	if l.Unit == "" && l.Algorithm == Concurrency {
		return "concurrent-requests"
	}
	return l.Unit
}

// Capacity returns the most cost that can pass at once: Burst (default
// Quota) for TokenBucket, GCRA and LeakyBucket, Quota for the others.
// A cost above Capacity is never allowed.
func (l Limit) Capacity() int64 {
	if l.Algorithm.rated() && l.Burst > 0 {
		return l.Burst
	}
	return l.Quota
}

// PolicyName returns Name, or when it is empty a name derived from Quota,
// Unit and Period: "100-per-1m", "10-per-1s", "5000-per-1d", "3-per-90s",
// "10000-tokens-per-1m"; for a Concurrency limit, from Quota and Unit
// alone: "8-in-flight".
func (l Limit) PolicyName() string {
	if l.Name != "" {
		return l.Name
	}
	q := strconv.FormatInt(l.Quota, 10)
	if l.Unit != "" {
		q += "-" + l.Unit
	}
	if l.Algorithm == Concurrency {
		return q + "-in-flight"
	}
	return q + "-per-" + shortDuration(l.Period)
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
	_, err := l.compile()
	return err
}

// validateName checks what no computation reads but headers carry: Name
// and Unit.
func (l *Limit) validateName() error {
	switch {
	case len(l.Name) > MaxNameLen:
		return l.invalid("name is %d bytes long, more than %d", len(l.Name), MaxNameLen)
	case !isPrintableASCII(l.Name):
		return l.invalid("name %q is not printable ASCII", l.Name)
	case len(l.Unit) > MaxUnitLen:
		return l.invalid("unit is %d bytes long, more than %d", len(l.Unit), MaxUnitLen)
	case l.Unit != "" && !isToken(l.Unit):
		return l.invalid("unit %q is not an sf-token (a letter or '*', then letters, digits and !#$%%&'*+-.^_`|~:/)", l.Unit)
	}
	return nil
}

// isToken reports whether s is an RFC 9651 sf-token: ALPHA or "*", then
// tchar, ":" or "/".
func isToken(s string) bool {
	if s == "" || !(isAlpha(s[0]) || s[0] == '*') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlpha(c) && !('0' <= c && c <= '9') && !strings.ContainsRune("!#$%&'*+-.^_`|~:/", rune(c)) {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

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

// compile validates l's numbers and compiles them for the engine. It does
// not check Name, which no computation reads (Validate does).
func (l *Limit) compile() (engine.Limit, error) {
	return engine.Compile(engine.Spec{Name: l.Name, Algorithm: engine.Algorithm(l.Algorithm), Quota: l.Quota,
		Period: l.Period, Burst: l.Burst, Precision: l.Precision})
}
