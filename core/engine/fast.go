package engine

import "math/bits"

// The fast path: a Take or a Peek of one limit, of the algorithms most
// limits use, on any tick. It computes the same Result
// and leaves the same state as the general path (first, second, report,
// window), which a randomized test in fast_internal_test.go holds it to,
// but computes each limit's usage once, with the algorithm known, instead
// of once per step through a switch. Step takes it when it applies.

// fast1 applies op (a Take or a Peek) to the one limit l at now, writes the
// Result to res and returns keep, or reports false and changes nothing when
// the fast path does not apply.
func fast1(op *Op, l *Limit, now int64, st *State, res *Result) (keep int64, ok bool) {
	if op.Kind > Peek {
		return 0, false
	}
	switch l.Algorithm {
	case GCRA:
		return fastGCRA(op, l, now, st, res), true
	case TokenBucket:
		return fastToken(op, l, now, st, res), true
	case SlidingWindow:
		return fastSliding(op, l, now, st, res), true
	case FixedWindow:
		return fastFixed(op, l, now, st, res), true
	}
	return 0, false
}

// coarse returns, for a limit of Tick above 1, what roll records of now:
// the tick tt before now and, for the rated algorithms, the refill rc
// since it (see shape.since).
func coarse(l *Limit, now int64) (tt, rc int64) {
	tt = floorDiv(now, l.Tick)
	if l.Algorithm.rated() {
		r := now - tt*l.Tick
		rc = r * l.qTick
		if l.qRest != 0 { // 0 when the tick divides the quota, as it does most large ones
			rc += ceilDiv(r*l.qRest, l.Tick)
		}
	}
	return tt, rc
}

// fastGCRA is the fast path of GCRA (gcra.go): TAT = A + B/Q ticks, and the
// debt Q·max(TAT − tt, 0), capped; at Tick 1, tt = now and rc = 0.
func fastGCRA(op *Op, l *Limit, now int64, st *State, res *Result) int64 {
	q, capa, p, tick := l.Quota, l.Capacity, l.PeriodTicks, l.Tick
	tt, rc := now, int64(0)
	if tick != 1 {
		tt, rc = coarse(l, now)
	}
	if st.Ident != l.Ident {
		*st = State{Ident: l.Ident, A: tt, Log: st.Log[:0]}
	}
	if st.B >= q {
		st.B = q - 1
	}
	if st.A < tt {
		st.A, st.B = tt, 0
	}
	limit := DebtFactor*capa*p + rc
	hi, lo := bits.Mul64(uint64(st.A-tt), uint64(q))
	over := hi != 0 || lo > uint64(limit) || int64(lo)+st.B > limit
	debt := limit
	if !over {
		debt = int64(lo) + st.B
	}
	c := op.Cost
	*res = Result{}
	switch excess := debt + (c-capa)*p; {
	case c > capa:
		res.Retry = -1
	case excess > 0:
		res.Retry = (tt+ceilDiv(excess, q))*tick - now
	default:
		res.Allowed = true
		if op.Kind == Take && c > 0 && !over {
			debt = min(max(debt, rc)+c*p, limit)
			st.A, st.B = tt+floorDiv(debt, q), floorMod(debt, q)
		}
	}
	rem := max(floorDiv(capa*p-debt, p), 0)
	res.Remaining = rem
	if debt != 0 {
		res.Reset = (tt+ceilDiv(debt, q))*tick - now
	}
	// The window: take rem, then when does one unit pass.
	d2 := debt
	if rem > 0 && !over {
		d2 = min(max(debt, rc)+rem*p, limit)
	}
	if e := d2 + (1-capa)*p; e > 0 {
		res.Window = (tt+ceilDiv(e, q))*tick - now
	}
	return res.Reset
}

// fastToken is the fast path of TokenBucket (tokenbucket.go): A = tokens ×
// P, refilled Q per tick since B; at Tick 1, tt = now and rc = 0.
func fastToken(op *Op, l *Limit, now int64, st *State, res *Result) int64 {
	q, capa, p, tick := l.Quota, l.Capacity, l.PeriodTicks, l.Tick
	tt, rc := now, int64(0)
	if tick != 1 {
		tt, rc = coarse(l, now)
	}
	full := capa * p
	if st.Ident != l.Ident {
		*st = State{Ident: l.Ident, A: full, B: tt, Log: st.Log[:0]}
	}
	st.A = min(st.A, full)
	if tt > st.B {
		if hi, lo := bits.Mul64(uint64(tt-st.B), uint64(q)); hi != 0 || lo >= uint64(full-st.A) {
			st.A = full
		} else {
			st.A += int64(lo)
		}
		st.B = tt
	}
	c := op.Cost
	floor := full - DebtFactor*capa*p - rc
	*res = Result{}
	switch {
	case c > capa:
		res.Retry = -1
	case st.A < c*p:
		res.Retry = (st.B+ceilDiv(c*p-st.A, q))*tick - now
	default:
		res.Allowed = true
		if op.Kind == Take && c > 0 {
			st.A = max(min(st.A, full-rc)-c*p, floor)
		}
	}
	rem := max(floorDiv(st.A, p), 0)
	res.Remaining = rem
	if st.A < full {
		res.Reset = (st.B+ceilDiv(full-st.A, q))*tick - now
	}
	a2 := st.A
	if rem > 0 {
		a2 = max(min(st.A, full-rc)-rem*p, floor)
	}
	if a2 < p {
		res.Window = (st.B+ceilDiv(p-a2, q))*tick - now
	}
	return res.Reset
}

// fastSliding is the fast path of SlidingWindow (slidingwindow.go): A = the
// current window, B and C the previous and current counts; times in ticks
// (tt: now's).
func fastSliding(op *Op, l *Limit, now int64, st *State, res *Result) int64 {
	q, p, tick := l.Quota, l.PeriodTicks, l.Tick
	tt := now
	if tick != 1 {
		tt, _ = coarse(l, now)
	}
	if st.Ident != l.Ident {
		*st = State{Ident: l.Ident, A: floorDiv(tt, p), Log: st.Log[:0]}
	}
	var e int64 // ticks into the current window
	switch start := st.A * p; {
	case tt < start:
	case tt < start+p:
		e = tt - start
	case tt < start+2*p:
		st.A, st.B, st.C = st.A+1, st.C, 0
		e = tt - start - p
	default:
		st.A, st.B, st.C = floorDiv(tt, p), 0, 0
		e = tt - st.A*p
	}
	c := op.Cost
	*res = Result{}
	switch {
	case c > q:
		res.Retry = -1
	case st.B*(p-e)+st.C*p+c*p > q*p:
		res.Retry = slidingWait(q, p, st.A, st.B, st.C, c)*tick - now
	default:
		res.Allowed = true
		if op.Kind == Take && c > 0 {
			st.C = min(st.C+c, DebtFactor*q)
		}
	}
	rem := q - st.C
	if st.B > 0 {
		rem -= ceilDiv(st.B*(p-e), p)
	}
	rem = max(rem, 0)
	res.Remaining = rem
	switch {
	case st.C > 0:
		res.Reset = (st.A+2)*p*tick - now
	case st.B > 0:
		res.Reset = (st.A+1)*p*tick - now
	}
	c2 := st.C
	if rem > 0 {
		c2 = min(st.C+rem, DebtFactor*q)
	}
	if st.B*(p-e)+c2*p+p > q*p {
		res.Window = slidingWait(q, p, st.A, st.B, c2, 1)*tick - now
	}
	return res.Reset
}

// slidingWait returns the tick at which cost c passes a sliding window in
// window w with counts prev and cur (slidingNeed's wait).
func slidingWait(q, p, w, prev, cur, c int64) int64 {
	if r := q - cur - c; r >= 0 && prev > 0 && p-floorDiv(r*p, prev) < p {
		return w*p + p - floorDiv(r*p, prev)
	}
	var e2 int64
	if cur > 0 {
		e2 = max(p-floorDiv((q-c)*p, cur), 0)
	}
	return (w+1)*p + e2
}

// fastFixed is the fast path of FixedWindow (fixedwindow.go): A = the
// window, B its count.
func fastFixed(op *Op, l *Limit, now int64, st *State, res *Result) int64 {
	q, p := l.Quota, l.Period
	if st.Ident != l.Ident {
		*st = State{Ident: l.Ident, A: floorDiv(now, p), Log: st.Log[:0]}
	}
	if now >= (st.A+1)*p {
		st.A, st.B = floorDiv(now, p), 0
	}
	c := op.Cost
	end := (st.A+1)*p - now
	*res = Result{}
	switch {
	case c > q:
		res.Retry = -1
	case st.B+c > q:
		res.Retry = end
	default:
		res.Allowed = true
		if op.Kind == Take && c > 0 {
			st.B = min(st.B+c, DebtFactor*q)
		}
	}
	res.Remaining, res.Window = q, end
	if st.B != 0 {
		res.Remaining, res.Reset = max(q-st.B, 0), end
	}
	return res.Reset
}
