package engine

import "math/bits"

// GCRA and LeakyBucket, in µs. The theoretical arrival time is
// TAT = A + B/Q with 0 ≤ B < Q, so that adding c·T = c·P/Q is exact: the
// debt beyond now, scaled by Q, is
//
//	debt = Q·(A − t) + B = Q·max(TAT − t, 0)
//
// and cost c passes when debt + c·P ≤ B·P (Burst × Period), which is
// max(TAT, t) + c·T − Burst·T ≤ t multiplied by Q. A wide limit computes
// the same in spans of time (wide.go).

func gcraRoll(sh *shape, st *State, now int64) {
	if st.B >= sh.Quota { // Quota lowered since the state was written
		st.B = sh.Quota - 1
	}
	if st.A < now {
		st.A, st.B = now, 0
	}
}

// gcraCap is the most debt a charge leaves: debtCap·P.
func (sh *shape) gcraCap() int64 { return sh.debtCap() * sh.Period }

// gcraDebt returns Q·(TAT − t) at t = now, capped at gcraCap; over
// reports that the true debt is above the cap (only possible for a clock
// behind the one that wrote the state).
func gcraDebt(sh *shape, st *State) (debt int64, over bool) {
	limit := sh.gcraCap()
	hi, lo := bits.Mul64(uint64(st.A-sh.tt), uint64(sh.Quota)) // st.A ≥ tt after roll
	if hi != 0 || lo > uint64(limit) || int64(lo)+st.B > limit {
		return limit, true
	}
	return int64(lo) + st.B, false
}

func gcraNeed(sh *shape, st *State, now, c int64) (ok bool, retry, delay int64) {
	if sh.Wide {
		return wideNeed(sh, st, c)
	}
	debt, _ := gcraDebt(sh, st)
	if excess := debt + (c-sh.Capacity)*sh.Period; excess > 0 {
		return false, ceilDiv(excess, sh.Quota), 0
	}
	if sh.Algorithm == LeakyBucket && debt > 0 {
		delay = ceilDiv(debt, sh.Quota)
	}
	return true, 0, delay
}

// gcraAdd moves TAT by d·T. A charge pulls TAT up to now first; it
// saturates at debtCap·T past now and never moves TAT back (a clock behind
// the writer's sees a debt above the cap and leaves it). A refund comes off
// the stored TAT, down to now.
func gcraAdd(sh *shape, st *State, d int64) {
	if sh.Wide {
		wideAdd(sh, st, d)
		return
	}
	if d < 0 {
		num := st.B + d*sh.Period
		st.A, st.B = st.A+floorDiv(num, sh.Quota), floorMod(num, sh.Quota)
		if st.A < sh.tt {
			st.A, st.B = sh.tt, 0
		}
		return
	}
	debt, over := gcraDebt(sh, st)
	if over {
		return
	}
	debt = min(debt+d*sh.Period, sh.gcraCap())
	st.A, st.B = sh.tt+floorDiv(debt, sh.Quota), floorMod(debt, sh.Quota)
}

func gcraReport(sh *shape, st *State, now int64) (int64, int64) {
	if sh.Wide {
		return wideReport(sh, st)
	}
	debt, _ := gcraDebt(sh, st)
	rem := max(floorDiv(sh.Capacity*sh.Period-debt, sh.Period), 0)
	return rem, ceilDiv(debt, sh.Quota)
}
