package engine

// SlidingWindow, in ticks of sh.Tick µs (1µs unless Quota × Period passes
// 2^47µs). State: A = window number w of the current window, B = previous
// window's count, C = current window's count. With e the ticks elapsed in
// the current window, the weighted usage, scaled by P, is
//
//	used = prev·(P−e) + cur·P
//
// and cost c passes when used + c·P ≤ Q·P. Windows start on tick
// boundaries, so w and the counts are exact; e is rounded down to a whole
// tick, which weighs the previous window more: never more permissive than
// exact arithmetic. Each product stays within 2^53; their sum may pass it,
// but only far beyond Q·P ≤ 2^47, where a rounded sum decides alike.

// slidingRoll moves the windows up to now and records in sh.e the ticks
// elapsed in the current window. Dividing is needed only when more than one
// window passed; a state from a later window (a clock that stepped back)
// pins time to that window's start.
func slidingRoll(sh *shape, st *State, now int64) {
	start := st.A * sh.PeriodTicks
	switch tt := sh.tt; {
	case tt < start:
		sh.e = 0
	case tt < start+sh.PeriodTicks:
		sh.e = tt - start
	case tt < start+2*sh.PeriodTicks:
		st.A, st.B, st.C = st.A+1, st.C, 0
		sh.e = tt - start - sh.PeriodTicks
	default:
		st.A, st.B, st.C = floorDiv(tt, sh.PeriodTicks), 0, 0
		sh.e = tt - st.A*sh.PeriodTicks
	}
}

func slidingUsed(sh *shape, st *State) int64 { return st.B*(sh.PeriodTicks-sh.e) + st.C*sh.PeriodTicks }

func slidingNeed(sh *shape, st *State, now, c int64) (bool, int64) {
	w := st.A
	if slidingUsed(sh, st)+c*sh.PeriodTicks <= sh.Quota*sh.PeriodTicks {
		return true, 0
	}
	var at int64 // tick at which c passes
	if r := sh.Quota - st.C - c; r >= 0 && st.B > 0 && sh.PeriodTicks-floorDiv(r*sh.PeriodTicks, st.B) < sh.PeriodTicks {
		// Later in this window, once prev·(P−e') ≤ r·P.
		at = w*sh.PeriodTicks + sh.PeriodTicks - floorDiv(r*sh.PeriodTicks, st.B)
	} else {
		// In the next window, where prev = cur and cur = 0:
		// cur·(P−e') ≤ (Q−c)·P.
		e2 := int64(0)
		if st.C > 0 {
			e2 = max(sh.PeriodTicks-floorDiv((sh.Quota-c)*sh.PeriodTicks, st.C), 0)
		}
		at = (w+1)*sh.PeriodTicks + e2
	}
	return false, at*sh.Tick - now
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
	rem := sh.Quota - st.C // and less the previous window's weight, rounded up
	if st.B > 0 {
		rem -= ceilDiv(st.B*(sh.PeriodTicks-sh.e), sh.PeriodTicks)
	}
	rem = max(rem, 0)
	switch {
	case st.C > 0:
		return rem, (w+2)*sh.PeriodTicks*sh.Tick - now
	case st.B > 0:
		return rem, (w+1)*sh.PeriodTicks*sh.Tick - now
	}
	return rem, 0
}
