package engine

import "math/bits"

// Wide limits (Limit.Wide): Capacity × Period above 2^47, where a rated
// limit's debt scaled by Q, Q·(TAT − t), or a sliding window's weighted
// usage, prev·(P − e), may reach DebtFactor × 2^47 × 2^45 = 2^98. They are
// computed exactly all the same, and every stored value and result stays
// below 2^53:
//
//   - GCRA, LeakyBucket and a wide TokenBucket (in GCRA's registers) run
//     gcra.go's arithmetic in 128 bits (u128): the debt x = Q·(A − t) + B,
//     at most DebtFactor·Burst·P, against (Burst − c)·P; each quotient,
//     x/Q (a time) or x/P (units), is below 2^53, so one 128-by-64-bit
//     division (bits.Div64, the same instruction as a 64-bit one on
//     amd64) yields it.
//   - SlidingWindow passes c when cur + c + ⌈prev·(P − e)/P⌉ ≤ Q, the
//     exact form of prev·(P−e) + (cur+c)·P ≤ Q·P (cur, c and Q are
//     whole), which every sliding window computes (slidingwindow.go).
//
// The Redis store's Lua computes the same over doubles: a product below
// 2^52 is divided at once, where doubles are exact, and one past it by an
// exact routine (apply.lua.tmpl, mdm), on this path only.

// MulDivMod returns ⌊a·b/d⌋ and a·b mod d for a, b ≥ 0 and d > 0 whose
// quotient is below 2^63, exactly, through 128 bits. (The Redis store
// computes a wide limit's spans with it, for its specialized scripts.)
func MulDivMod(a, b, d int64) (q, r int64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi == 0 {
		return int64(lo / uint64(d)), int64(lo % uint64(d))
	}
	uq, ur := bits.Div64(hi, lo, uint64(d))
	return int64(uq), int64(ur)
}

// u128 is an unsigned 128-bit integer: hi·2^64 + lo.
type u128 struct{ hi, lo uint64 }

// mul128 returns a·b for a, b ≥ 0.
func mul128(a, b int64) u128 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return u128{hi, lo}
}

func (x u128) plus(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	return u128{x.hi + y.hi + c, lo}
}

// minus returns x − y for x ≥ y.
func (x u128) minus(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	return u128{x.hi - y.hi - b, lo}
}

func (x u128) less(y u128) bool { return x.hi < y.hi || x.hi == y.hi && x.lo < y.lo }

// divMod returns ⌊x/d⌋ and x mod d for d > 0 and a quotient below 2^63.
func (x u128) divMod(d int64) (q, r int64) {
	uq, ur := bits.Div64(x.hi, x.lo, uint64(d))
	return int64(uq), int64(ur)
}

// ceilDiv returns ⌈x/d⌉ for d > 0 and a quotient below 2^63.
func (x u128) ceilDiv(d int64) int64 {
	q, r := x.divMod(d)
	if r != 0 {
		q++
	}
	return q
}

// wideDebt is gcraDebt on a wide limit: Q·(TAT − t) at t = now (TAT ≥ now
// after roll), capped at debtCap·P; over as gcraDebt's.
func wideDebt(sh *shape, st *State) (x u128, over bool) {
	x = mul128(st.A-sh.tt, sh.Quota).plus(u128{0, uint64(st.B)})
	if limit := mul128(sh.debtCap(), sh.Period); limit.less(x) {
		return limit, true
	}
	return x, false
}

func wideNeed(sh *shape, st *State, c int64) (ok bool, retry, delay int64) {
	x, _ := wideDebt(sh, st)
	if room := mul128(sh.Capacity-c, sh.Period); room.less(x) {
		return false, x.minus(room).ceilDiv(sh.Quota), 0
	}
	if sh.Algorithm == LeakyBucket {
		delay = x.ceilDiv(sh.Quota)
	}
	return true, 0, delay
}

// wideAdd is gcraAdd on a wide limit.
func wideAdd(sh *shape, st *State, d int64) {
	if d < 0 {
		wideBack(sh, st, mul128(-d, sh.Period))
		return
	}
	x, over := wideDebt(sh, st)
	if over {
		return
	}
	x = x.plus(mul128(d, sh.Period))
	if limit := mul128(sh.debtCap(), sh.Period); limit.less(x) {
		x = limit
	}
	q, r := x.divMod(sh.Quota)
	st.A, st.B = sh.tt+q, r
}

// wideBack moves TAT back by x/Q (x at most debtCap·P), not before now.
func wideBack(sh *shape, st *State, x u128) {
	q, r := x.divMod(sh.Quota)
	st.A, st.B = st.A-q, st.B-r
	if st.B < 0 {
		st.A, st.B = st.A-1, st.B+sh.Quota
	}
	if st.A < sh.tt {
		st.A, st.B = sh.tt, 0
	}
}

func wideReport(sh *shape, st *State) (int64, int64) {
	x, _ := wideDebt(sh, st)
	return max(sh.Capacity-x.ceilDiv(sh.Period), 0), x.ceilDiv(sh.Quota)
}

// wideCredit is credit on a wide limit, in 128 bits.
func (sh *shape) wideCredit(r, lo, reset int64) u128 {
	q, rp := sh.Quota, mul128(r, sh.Period)
	rq, _ := rp.divMod(q) // ⌊r·P/Q⌋
	var x u128
	if d := max(sh.tt-lo, 0); d <= rq {
		x = rp.minus(mul128(d, q))
	}
	if reset > 0 {
		k := lo + reset - 1 - sh.tt // µs from now to Due, less one
		switch {
		case k > rq+1:
			x = rp
		case k >= 0:
			if y := mul128(k, q).plus(u128{0, 1}); x.less(y) {
				x = y
			}
		}
	}
	if rp.less(x) {
		return rp
	}
	return x
}
