package engine

import "math/bits"

// Wide limits (Limit.Wide): Capacity × Period above 2^47, where a rated
// limit's debt scaled by Q, Q·(TAT − t), or a sliding window's weighted
// usage, prev·(P − e), may reach DebtFactor × 2^47 × 2^45 = 2^98. They are
// computed exactly all the same, in two forms that keep every stored value
// and every result below 2^53:
//
//   - GCRA, LeakyBucket and a wide TokenBucket (in GCRA's registers) count
//     time as spans w + f/Q µs, 0 ≤ f < Q: TAT is one (A, B), and n units
//     take n·T = ⌊n·P/Q⌋ + (n·P mod Q)/Q µs, the one product computed in
//     128 bits (mulDivMod). A cost c passes when the debt D = max(TAT −
//     t, 0), at most DebtFactor·Burst·T, is at most (Burst − c)·T; it
//     waits the rest, rounded up to a µs. Remaining is Burst − ⌈D·Q/P⌉.
//   - SlidingWindow passes c when cur + c + ⌈prev·(P − e)/P⌉ ≤ Q, the
//     exact form of prev·(P−e) + (cur+c)·P ≤ Q·P (cur, c and Q are whole).
//
// The Redis store's Lua computes the same with an exact routine over
// doubles (apply.lua.tmpl, mdm), on this path only.

// mulDivMod returns ⌊a·b/d⌋ and a·b mod d for a, b ≥ 0 and d > 0 whose
// quotient is below 2^63.
func mulDivMod(a, b, d int64) (q, r int64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi == 0 {
		return int64(lo / uint64(d)), int64(lo % uint64(d))
	}
	uq, ur := bits.Div64(hi, lo, uint64(d))
	return int64(uq), int64(ur)
}

// mulAddCeilDiv returns ⌈(a·b + c)/d⌉ for a, b, c ≥ 0 and d > 0 whose
// quotient is below 2^63.
func mulAddCeilDiv(a, b, c, d int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	lo, carry := bits.Add64(lo, uint64(c), 0)
	hi += carry
	q, r := bits.Div64(hi, lo, uint64(d))
	if r != 0 {
		q++
	}
	return int64(q)
}

// span is a time span of a wide rated limit: w + f/Q µs, 0 ≤ f < Q.
type span struct{ w, f int64 }

// cmp returns -1, 0 or 1 as a is shorter than, as long as or longer than b.
func (a span) cmp(b span) int {
	switch {
	case a.w < b.w || a.w == b.w && a.f < b.f:
		return -1
	case a == b:
		return 0
	}
	return 1
}

// ceil returns a rounded up to a whole µs.
func (a span) ceil() int64 {
	if a.f > 0 {
		return a.w + 1
	}
	return a.w
}

// units returns n·T, the time n ≥ 0 units take to refill.
func (sh *shape) units(n int64) span {
	w, f := mulDivMod(n, sh.Period, sh.Quota)
	return span{w, f}
}

func (sh *shape) plus(a, b span) span {
	s := span{a.w + b.w, a.f + b.f}
	if s.f >= sh.Quota {
		s.w, s.f = s.w+1, s.f-sh.Quota
	}
	return s
}

func (sh *shape) minus(a, b span) span {
	s := span{a.w - b.w, a.f - b.f}
	if s.f < 0 {
		s.w, s.f = s.w-1, s.f+sh.Quota
	}
	return s
}

// wideDebt returns the debt max(TAT − t, 0) of a wide rated limit rolled
// to now (so TAT ≥ t), capped at the most a charge leaves, debtCap·T; over
// reports that the true debt is above the cap (a clock behind the one that
// wrote the state).
func wideDebt(sh *shape, st *State) (d span, over bool) {
	d = span{st.A - sh.tt, st.B}
	if limit := sh.units(sh.debtCap()); d.cmp(limit) > 0 {
		return limit, true
	}
	return d, false
}

func wideNeed(sh *shape, st *State, c int64) (ok bool, retry, delay int64) {
	d, _ := wideDebt(sh, st)
	if room := sh.units(sh.Capacity - c); d.cmp(room) > 0 {
		return false, sh.minus(d, room).ceil(), 0
	}
	if sh.Algorithm == LeakyBucket {
		delay = d.ceil()
	}
	return true, 0, delay
}

// wideAdd is gcraAdd on a wide limit: a charge moves TAT (from now at the
// earliest) by d·T, saturating at debtCap·T past now, and never moves it
// back; a refund moves it back by -d·T, not before now.
func wideAdd(sh *shape, st *State, d int64) {
	if d < 0 {
		wideBack(sh, st, sh.units(-d))
		return
	}
	debt, over := wideDebt(sh, st)
	if over {
		return
	}
	debt = sh.plus(debt, sh.units(d))
	if limit := sh.units(sh.debtCap()); debt.cmp(limit) > 0 {
		debt = limit
	}
	st.A, st.B = sh.tt+debt.w, debt.f
}

// wideBack moves TAT back by x, not before now.
func wideBack(sh *shape, st *State, x span) {
	tat := sh.minus(span{st.A, st.B}, x)
	st.A, st.B = tat.w, tat.f
	if st.A < sh.tt {
		st.A, st.B = sh.tt, 0
	}
}

func wideReport(sh *shape, st *State) (int64, int64) {
	d, _ := wideDebt(sh, st)
	rem := max(sh.Capacity-mulAddCeilDiv(d.w, sh.Quota, d.f, sh.Period), 0) // D·Q/P ≤ debtCap
	return rem, d.ceil()
}

// wideCredit is credit on a wide limit, as a span: min(r·T, Due − now),
// Due from the decay bound and from reset, as credit computes it.
func (sh *shape) wideCredit(r, lo, reset int64) span {
	rt := sh.units(r)
	var x span
	if d := max(sh.tt-lo, 0); d <= rt.w {
		x = span{rt.w - d, rt.f}
	}
	if reset > 0 {
		k := lo + reset - 1 - sh.tt
		switch {
		case k > rt.w+1:
			x = rt
		case k >= 0: // k + 1/Q
			y := span{k, 1}
			if sh.Quota == 1 {
				y = span{k + 1, 0}
			}
			x = maxSpan(x, y)
		}
	}
	if x.cmp(rt) > 0 {
		return rt
	}
	return x
}

func maxSpan(a, b span) span {
	if a.cmp(b) < 0 {
		return b
	}
	return a
}
