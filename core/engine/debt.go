package engine

import (
	"math/big"
	"time"
)

// Debt is for store authors whose store bounds its keys and must choose
// which to forget. It returns the share of a limit's capacity that the
// limit's state st holds at now (Unix µs): what forgetting st would forgive.
//
// Debt is 0 exactly when st equals a fresh state (the limit is fully
// replenished, so forgetting it changes no decision), 1 when the limit is
// exhausted or owes post-hoc debt (Charge) beyond its capacity, and in
// between the usage at now divided by the capacity, that is
// 1 − Remaining/Capacity with Remaining not yet floored. With Q = quota,
// B = capacity, P = Period and the state rolled to now as Step rolls it:
//
//	FixedWindow     count / Q in the current window
//	SlidingWindow   (prev·(P−e)/P + cur) / Q, e = time into the current window
//	SlidingLog      (Σ costs of the entries younger than P) / Q
//	BucketedWindow  (Σ counts of the last P/p buckets) / Q
//	TokenBucket     (B − tokens) / B
//	GCRA            max(TAT − t, 0) / (B·T), T = P/Q
//	LeakyBucket     as GCRA
//
// The usage and the capacity are computed exactly, in integers, and divided
// once, so Debt is the exact ratio rounded to a float64.
//
// quota and capacity are the Quota and Capacity() of the limit whose Step
// last wrote st (a store keeps them beside the state); the rest of the limit
// (algorithm, period, time unit, precision) is read from st.Ident. The zero
// State is fresh: 0. A state Debt cannot read — an Ident that no limit of
// that quota and capacity writes — counts as fully in debt: 1. Debt does
// not change st (its Log included) and is safe for concurrent use.
func Debt(st State, quota, capacity, now int64) float64 {
	if st.Ident == 0 {
		return 0
	}
	var sh shape
	if !sh.layout(st.Ident, quota, capacity) {
		return 1
	}
	sh.roll(&st, now) // st is a copy; roll only reslices its Log
	if sh.Wide {
		return wideRatio(sh.wideUsage(&st))
	}
	used, full := sh.usage(&st)
	switch {
	case used <= 0:
		return 0
	case used >= full:
		return 1
	}
	return float64(used) / float64(full)
}

// layout sets sh to the limit of quota and capacity whose state layout is id
// (see Limit.Ident), and reports whether there is one.
func (sh *shape) layout(id uint64, quota, capacity int64) bool {
	alg := Algorithm(id&15) - 1 // 0 wraps to an unknown algorithm
	x := time.Duration(id >> 4 & 0xfff)
	p := id >> 16
	if p == 0 || p > uint64(MaxPeriod/time.Microsecond) {
		return false
	}
	s := Spec{Quota: quota, Period: time.Duration(p) * time.Microsecond, Algorithm: alg}
	if alg.rated() {
		s.Burst = capacity
	}
	if alg == BucketedWindow {
		if x == 0 {
			return false
		}
		s.Precision = s.Period / x
	}
	l, err := Compile(s)
	if err != nil || l.Ident != id || l.Capacity != capacity {
		return false
	}
	sh.Limit = l
	return true
}

// usage returns a rolled state's usage and the capacity, in the same unit:
// Debt is used/full. A wide limit's take wideUsage.
func (sh *shape) usage(st *State) (used, full int64) {
	switch sh.Algorithm {
	case FixedWindow:
		return st.B, sh.Quota
	case SlidingWindow:
		return slidingUsed(sh, st), sh.Quota * sh.Period
	case SlidingLog, BucketedWindow, Concurrency:
		return st.A, sh.Quota
	case TokenBucket:
		full = sh.Capacity * sh.Period
		return full - st.A, full
	default:
		debt, _ := gcraDebt(sh, st)
		return debt, sh.Capacity * sh.Period
	}
}

// wideUsage is usage for a wide limit, whose numbers may pass 2^63: used
// and full as big integers (Debt's rare path, which may allocate).
func (sh *shape) wideUsage(st *State) (used, full *big.Int) {
	mul := func(a, b int64) *big.Int { return new(big.Int).Mul(big.NewInt(a), big.NewInt(b)) }
	if sh.Algorithm == SlidingWindow {
		used = mul(st.B, sh.Period-sh.e)
		return used.Add(used, mul(st.C, sh.Period)), mul(sh.Quota, sh.Period)
	}
	x, _ := wideDebt(sh, st)
	used = new(big.Int).SetUint64(x.hi)
	used.Lsh(used, 64).Add(used, new(big.Int).SetUint64(x.lo))
	return used, mul(sh.Capacity, sh.Period)
}

// wideRatio is Debt's used/full, as it rounds it.
func wideRatio(used, full *big.Int) float64 {
	switch {
	case used.Sign() <= 0:
		return 0
	case used.Cmp(full) >= 0:
		return 1
	}
	f, _ := new(big.Rat).SetFrac(used, full).Float64()
	return f
}
