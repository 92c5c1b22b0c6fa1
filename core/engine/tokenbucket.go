package engine

import "math/bits"

// TokenBucket, in ticks. State: A = tokens × P (in ticks), so that a refill
// of Q per P is Q per tick, exactly; B = last refill tick. Full = B·P.
// On a coarse tick a call counts the refill up to tt, the tick boundary
// before now: never more than exact arithmetic, at most one tick's refill
// less; tokenAdd keeps a charge from gaining the refill between tt and now.

func tokenRoll(sh *shape, st *State, now int64) {
	full := sh.Capacity * sh.PeriodTicks
	st.A = min(st.A, full) // Burst lowered since the state was written
	tt := sh.tt
	if tt <= st.B {
		return // no time passed, or a clock that stepped back
	}
	// Refill el·Q, up to full; el·Q is compared without overflow.
	if hi, lo := bits.Mul64(uint64(tt-st.B), uint64(sh.Quota)); hi != 0 || lo >= uint64(full-st.A) {
		st.A = full
	} else {
		st.A += int64(lo)
	}
	st.B = tt
}

// tokenNeed: tokens ≥ c, i.e. A ≥ c·P; else wait ⌈(c·P − A)/Q⌉ ticks.
func tokenNeed(sh *shape, st *State, now, c int64) (bool, int64) {
	if st.A >= c*sh.PeriodTicks {
		return true, 0
	}
	return false, (st.B+ceilDiv(c*sh.PeriodTicks-st.A, sh.Quota))*sh.Tick - now
}

// tokenAdd takes d tokens (a charge may go into debt, down to
// full − debtCap·P) or gives them back (a refund, up to full).
//
// A charge is made at now, but A is counted at tick tt (B = tt after roll),
// which on a coarse tick lies sh.rc of refill before now. A later call
// counts that refill from tt, so A must leave room for it: a bucket that it
// would fill by now is full at now and holds at most full − rc at tt, and a
// debt saturates at debtCap at now, rc beyond it at tt. Else a later call
// would be credited refill that exact arithmetic wastes on a full bucket.
func tokenAdd(sh *shape, st *State, d int64) {
	full := sh.Capacity * sh.PeriodTicks
	if d > 0 {
		st.A = max(min(st.A, full-sh.rc)-d*sh.PeriodTicks, full-sh.debtCap()*sh.PeriodTicks-sh.rc)
		return
	}
	st.A = min(st.A-d*sh.PeriodTicks, full)
}

func tokenReport(sh *shape, st *State, now int64) (int64, int64) {
	full := sh.Capacity * sh.PeriodTicks
	rem := max(floorDiv(st.A, sh.PeriodTicks), 0)
	if st.A >= full {
		return rem, 0
	}
	return rem, (st.B+ceilDiv(full-st.A, sh.Quota))*sh.Tick - now
}
