package engine

// SlidingWindow, in µs. State: A = window number w of the current window,
// B = previous window's count, C = current window's count. With e the µs
// elapsed in the current window, the weighted usage, scaled by P, is
//
//	used = prev·(P−e) + cur·P
//
// and cost c passes when used + c·P ≤ Q·P, that is when
// cur + c + ⌈prev·(P−e)/P⌉ ≤ Q (cur, c and Q are whole): the form it is
// computed in, exact in 128 bits for a wide limit too (wide.go).

// slidingRoll moves the windows up to now and records in sh.e the µs
// elapsed in the current window. Dividing is needed only when more than one
// window passed; a state from a later window (a clock that stepped back)
// pins time to that window's start.
func slidingRoll(sh *shape, st *State, now int64) {
	start := st.A * sh.Period
	switch {
	case now < start:
		sh.e = 0
	case now < start+sh.Period:
		sh.e = now - start
	case now < start+2*sh.Period:
		st.A, st.B, st.C = st.A+1, st.C, 0
		sh.e = now - start - sh.Period
	default:
		st.A, st.B, st.C = floorDiv(now, sh.Period), 0, 0
		sh.e = now - st.A*sh.Period
	}
}

// slidingUsed is used, for a limit that is not wide (Debt's).
func slidingUsed(sh *shape, st *State) int64 { return st.B*(sh.Period-sh.e) + st.C*sh.Period }

// slidingWeight returns the previous window's weight now, rounded up:
// ⌈prev·(P−e)/P⌉.
func slidingWeight(p, e, prev int64) int64 {
	if prev == 0 {
		return 0
	}
	q, r := MulDivMod(prev, p-e, p)
	if r != 0 {
		q++
	}
	return q
}

func slidingNeed(sh *shape, st *State, now, c int64) (bool, int64) {
	if st.C+c+slidingWeight(sh.Period, sh.e, st.B) <= sh.Quota {
		return true, 0
	}
	return false, slidingWait(sh.Quota, sh.Period, st.A, st.B, st.C, c) - now
}

// slidingWait returns the instant at which cost c passes a sliding window
// in window w with counts prev and cur, once it does not pass now.
func slidingWait(q, p, w, prev, cur, c int64) int64 {
	// Later in this window, once prev·(P−e') ≤ r·P: e' = P − ⌊r·P/prev⌋,
	// when that is in this window. (r < prev, or c would pass now.)
	if r := q - cur - c; r >= 0 && r < prev {
		if x, _ := MulDivMod(r, p, prev); x > 0 {
			return w*p + p - x
		}
	}
	// In the next window, where prev = cur and cur = 0:
	// cur·(P−e') ≤ (Q−c)·P.
	var e2 int64
	if cur > q-c {
		x, _ := MulDivMod(q-c, p, cur)
		e2 = p - x
	}
	return (w+1)*p + e2
}

// slidingAdd charges the current window; a refund comes out of the current
// window first, then the previous one.
func slidingAdd(sh *shape, st *State, d int64) {
	if d > 0 {
		st.C = min(st.C+d, sh.debtCap())
		return
	}
	r := -d
	x := min(st.C, r)
	st.C -= x
	st.B = max(st.B-(r-x), 0)
}

func slidingReport(sh *shape, st *State, now int64) (int64, int64) {
	w := st.A
	rem := max(sh.Quota-st.C-slidingWeight(sh.Period, sh.e, st.B), 0)
	switch {
	case st.C > 0:
		return rem, (w+2)*sh.Period - now
	case st.B > 0:
		return rem, (w+1)*sh.Period - now
	}
	return rem, 0
}
