package engine

import "math/bits"

// TokenBucket, in µs. State: A = tokens × P, so that a refill of Q per P is
// Q per µs, exactly; B = last refill. Full = Burst·P. A wide limit keeps
// GCRA's registers instead (tokens × P may pass 2^53) and decides as GCRA
// does, which is the same machine: see wide.go.

func tokenRoll(sh *shape, st *State, now int64) {
	if sh.Wide {
		gcraRoll(sh, st, now)
		return
	}
	full := sh.Capacity * sh.Period
	st.A = min(st.A, full) // Burst lowered since the state was written
	if now <= st.B {
		return // no time passed, or a clock that stepped back
	}
	// Refill el·Q, up to full; el·Q is compared without overflow.
	if hi, lo := bits.Mul64(uint64(now-st.B), uint64(sh.Quota)); hi != 0 || lo >= uint64(full-st.A) {
		st.A = full
	} else {
		st.A += int64(lo)
	}
	st.B = now
}

// tokenNeed: tokens ≥ c, i.e. A ≥ c·P; else wait ⌈(c·P − A)/Q⌉ µs.
func tokenNeed(sh *shape, st *State, now, c int64) (bool, int64) {
	if sh.Wide {
		ok, retry, _ := wideNeed(sh, st, c)
		return ok, retry
	}
	if st.A >= c*sh.Period {
		return true, 0
	}
	return false, st.B + ceilDiv(c*sh.Period-st.A, sh.Quota) - now
}

// tokenAdd takes d tokens (a charge may go into debt, down to
// full − debtCap·P) or gives them back (a refund, up to full).
func tokenAdd(sh *shape, st *State, d int64) {
	if sh.Wide {
		wideAdd(sh, st, d)
		return
	}
	full := sh.Capacity * sh.Period
	if d > 0 {
		st.A = max(st.A-d*sh.Period, full-sh.debtCap()*sh.Period)
		return
	}
	st.A = min(st.A-d*sh.Period, full)
}

func tokenReport(sh *shape, st *State, now int64) (int64, int64) {
	if sh.Wide {
		return wideReport(sh, st)
	}
	full := sh.Capacity * sh.Period
	rem := max(floorDiv(st.A, sh.Period), 0)
	if st.A >= full {
		return rem, 0
	}
	return rem, st.B + ceilDiv(full-st.A, sh.Quota) - now
}
