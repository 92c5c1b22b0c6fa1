package engine

// FixedWindow, in microseconds. State: A = window number w = ⌊t/P⌋, B = count.

func fixedRoll(sh *shape, st *State, now int64) {
	// Division only when the window changed; a state from a later window
	// (a clock that stepped back) is kept as is.
	if now >= (st.A+1)*sh.Period {
		st.A, st.B = floorDiv(now, sh.Period), 0
	}
}

// fixedNeed: count + c ≤ Q; else wait for the next window.
func fixedNeed(sh *shape, st *State, now, c int64) (bool, int64) {
	if st.B+c <= sh.Quota {
		return true, 0
	}
	return false, (st.A+1)*sh.Period - now
}

func fixedAdd(sh *shape, st *State, d int64) {
	st.B = min(max(st.B+d, 0), sh.debtCap())
}

func fixedReport(sh *shape, st *State, now int64) (int64, int64) {
	if st.B == 0 {
		return sh.Quota, 0
	}
	return max(sh.Quota-st.B, 0), (st.A+1)*sh.Period - now
}
