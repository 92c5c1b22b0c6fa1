package engine

import "math/bits"

// GCRA and LeakyBucket, in ticks. The theoretical arrival time is
// TAT = A + B/Q ticks with 0 ≤ B < Q, so that adding c·T = c·P/Q is exact:
// the debt beyond now, scaled by Q, is
//
//	debt = Q·(A − t) + B = Q·max(TAT − t, 0)
//
// and cost c passes when debt + c·P ≤ B·P (Burst × Period), which is
// max(TAT, t) + c·T − Burst·T ≤ t multiplied by Q. On a coarse tick t is
// tt, the tick boundary before now, where the debt is never less than at
// now and at most one tick's refill more; gcraAdd keeps a charge from
// gaining the refill between tt and now.

func gcraRoll(sh *shape, st *State, now int64) {
	tt := sh.tt
	if st.B >= sh.Quota { // Quota lowered since the state was written
		st.B = sh.Quota - 1
	}
	if st.A < tt {
		st.A, st.B = tt, 0
	}
}

// gcraCap is the most debt a charge leaves at tick tt: debtCap·P at now,
// which is sh.rc more at tt.
func (sh *shape) gcraCap() int64 { return sh.debtCap()*sh.PeriodTicks + sh.rc }

// gcraDebt returns Q·(TAT − t) at tick t = tt, capped at gcraCap; over
// reports that the true debt is above the cap (only possible for a clock
// behind the one that wrote the state).
func gcraDebt(sh *shape, st *State) (tt, debt int64, over bool) {
	tt = sh.tt
	limit := sh.gcraCap()
	hi, lo := bits.Mul64(uint64(st.A-tt), uint64(sh.Quota)) // st.A ≥ tt after roll
	if hi != 0 || lo > uint64(limit) || int64(lo)+st.B > limit {
		return tt, limit, true
	}
	return tt, int64(lo) + st.B, false
}

func gcraNeed(sh *shape, st *State, now, c int64) (ok bool, retry, delay int64) {
	tt, debt, _ := gcraDebt(sh, st)
	if excess := debt + (c-sh.Capacity)*sh.PeriodTicks; excess > 0 {
		return false, (tt+ceilDiv(excess, sh.Quota))*sh.Tick - now, 0
	}
	if sh.Algorithm == LeakyBucket && debt > 0 {
		delay = max((tt+ceilDiv(debt, sh.Quota))*sh.Tick-now, 0)
	}
	return true, 0, delay
}

// gcraAdd moves TAT by d·T. A charge is made at now: it first pulls TAT up
// to now (a debt of sh.rc at tt), not to tick tt, so that no refill before
// now is credited to it; it saturates at debtCap·T past now and never moves
// TAT back (a clock behind the writer's sees a debt above the cap and
// leaves it). A refund comes off the stored TAT, down to tick tt.
func gcraAdd(sh *shape, st *State, d int64) {
	if d < 0 {
		num := st.B + d*sh.PeriodTicks
		st.A, st.B = st.A+floorDiv(num, sh.Quota), floorMod(num, sh.Quota)
		if st.A < sh.tt {
			st.A, st.B = sh.tt, 0
		}
		return
	}
	tt, debt, over := gcraDebt(sh, st)
	if over {
		return
	}
	debt = min(max(debt, sh.rc)+d*sh.PeriodTicks, sh.gcraCap())
	st.A, st.B = tt+floorDiv(debt, sh.Quota), floorMod(debt, sh.Quota)
}

func gcraReport(sh *shape, st *State, now int64) (int64, int64) {
	tt, debt, _ := gcraDebt(sh, st)
	rem := max(floorDiv(sh.Capacity*sh.PeriodTicks-debt, sh.PeriodTicks), 0)
	if debt == 0 {
		return rem, 0
	}
	return rem, (tt+ceilDiv(debt, sh.Quota))*sh.Tick - now
}
