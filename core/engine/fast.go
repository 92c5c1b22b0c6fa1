package engine

import "math/bits"

// The fast path: a Take or a Peek of one limit (fast1), or of up to four
// (fastMulti), of the algorithms most limits use: GCRA, TokenBucket,
// SlidingWindow and FixedWindow. It computes the same Result and leaves
// the same states as the general path (first, second, report, window),
// which randomized tests in fast_internal_test.go hold it to, but computes
// each limit's usage once, with the algorithm known, instead of once per
// step through a switch. Step takes it when it applies, and TakeOne for a
// Take of one limit. Each algorithm's function returns the Result's
// numbers in registers (the fast path's algorithms have no Delay or
// Lease); fast1 writes them to a Result.

// fast1 applies op (a Take or a Peek) to the one limit l at now, writes the
// Result to res and returns keep, or reports false and changes nothing when
// the fast path does not apply. The fast path's algorithms have no Delay
// or Lease, and their keep is Reset. It and TakeOne dispatch through
// fastOf and oneTakes.
func fast1(op *Op, l *Limit, now int64, st *State, res *Result) (keep int64, ok bool) {
	if op.Kind > Peek {
		return 0, false
	}
	var allowed bool
	var remaining, reset, retry, window int64
	// fastOf's indices, called directly: through oneTakes, st would
	// escape, and fastMulti's copies of the states with it.
	switch take, c := op.Kind == Take, op.Cost; fastOf(l) {
	case wideTake:
		allowed, remaining, reset, retry, window, _, _ = fastWide(take, c, l, now, st)
	case gcraTake:
		allowed, remaining, reset, retry, window, _, _ = fastGCRA(take, c, l, now, st)
	case tokenTake:
		allowed, remaining, reset, retry, window, _, _ = fastToken(take, c, l, now, st)
	case slidingTake:
		allowed, remaining, reset, retry, window, _, _ = fastSliding(take, c, l, now, st)
	case fixedTake:
		allowed, remaining, reset, retry, window, _, _ = fastFixed(take, c, l, now, st)
	default:
		return 0, false
	}
	*res = Result{Allowed: allowed, Remaining: remaining, Reset: reset, Retry: retry, Window: window}
	return reset, true
}

// fastMulti is Step's fast path for a Take or a Peek on several limits,
// each of an algorithm fast1 takes, with the Result, keep and states of
// Step's general path. A Take goes to each limit as fast1's Take
// on a copy of its state: when every limit admits, the copies are the new
// states. Otherwise nothing is charged: a limit that denied reports its
// part as its Take left it (brought to now, the cost not taken), and one
// that would have admitted reports fast1's Peek of the cost on its own
// state, as the general path's first step leaves it. A Peek is fast1's Peek
// on each limit. ok is false, and nothing has changed, for an op other
// than a Take or a Peek, when some limit has no fast path (a log, or
// LeakyBucket), or when there are more than four.
func fastMulti(op *Op, limits []Limit, now int64, states []State, ls []LimitResult, res *Result) (keep int64, ok bool) {
	var copies [4]State
	var keeps [4]int64
	if op.Kind > Peek || len(limits) > len(copies) {
		return 0, false
	}
	for i := range limits {
		if fastOf(&limits[i]) == slowTake {
			return 0, false
		}
	}
	allowed := true
	var r Result
	for i := range limits {
		st := &states[i]
		if op.Kind == Take {
			copies[i] = *st
			st = &copies[i]
		}
		keeps[i], _ = fast1(op, &limits[i], now, st, &r)
		ls[i] = r.Part(0)
		allowed = allowed && r.Allowed
	}
	if op.Kind == Take {
		peek := Op{Plan: op.Plan, Key: op.Key, Kind: Peek, Cost: op.Cost}
		for i := range limits {
			if allowed || !ls[i].Allowed { // charged, or denied and so unchanged but for the roll
				states[i] = copies[i]
				continue
			}
			keeps[i], _ = fast1(&peek, &limits[i], now, &states[i], &r)
			ls[i] = r.Part(0)
		}
	}
	for i := range limits {
		keep = max(keep, keeps[i])
	}
	Combine(ls, res)
	res.At = now
	return keep, true
}

// gcraStart brings st, a GCRA state (A + B/Q, the TAT), to now for l: a
// state of another layout starts fresh, B stays below Q, and a TAT in the
// past is now. fastGCRA and fastWide begin with it.
func gcraStart(l *Limit, now int64, st *State) {
	if st.Ident != l.Ident {
		*st = State{Ident: l.Ident, A: now, Log: st.Log[:0]}
	}
	if st.B >= l.Quota {
		st.B = l.Quota - 1
	}
	if st.A < now {
		st.A, st.B = now, 0
	}
}

// fastGCRA is the fast path of GCRA (gcra.go): TAT = A + B/Q, and the
// debt Q·max(TAT − now, 0), capped.
func fastGCRA(take bool, c int64, l *Limit, now int64, st *State) (allowed bool, remaining, reset, retry, window, lease, keep int64) {
	q, capa, p := l.Quota, l.Capacity, l.Period
	gcraStart(l, now, st)
	limit := DebtFactor * capa * p
	hi, lo := bits.Mul64(uint64(st.A-now), uint64(q))
	over := hi != 0 || lo > uint64(limit) || int64(lo)+st.B > limit
	debt := limit
	if !over {
		debt = int64(lo) + st.B
	}
	switch excess := debt + (c-capa)*p; {
	case c > capa:
		retry = -1
	case excess > 0:
		retry = ceilPos(excess, q)
	default:
		allowed = true
		if take && c > 0 && !over {
			debt = min(debt+c*p, limit)
			dq, dr := divPos(debt, q) // debt ≥ 0: TAT ≥ now, 0 ≤ B < Q
			st.A, st.B = now+dq, dr
		}
	}
	remaining = unitsIn(capa*p-debt, p)
	reset = ceilPos(debt, q)
	// The window: take what remains, then when does one unit pass.
	d2 := debt
	if remaining > 0 && !over {
		d2 = min(debt+remaining*p, limit)
	}
	if e := d2 + (1-capa)*p; e > 0 {
		window = ceilPos(e, q)
	}
	return allowed, remaining, reset, retry, window, 0, reset
}

// fastWide is the fast path of a wide GCRA or TokenBucket (wide.go):
// fastGCRA's steps in 128 bits.
func fastWide(take bool, c int64, l *Limit, now int64, st *State) (allowed bool, remaining, reset, retry, window, lease, keep int64) {
	q, capa, p := l.Quota, l.Capacity, l.Period
	gcraStart(l, now, st)
	limit := mul128(DebtFactor*capa, p)
	debt := mul128(st.A-now, q).plus(u128{0, uint64(st.B)})
	over := limit.less(debt)
	if over {
		debt = limit
	}
	took := false
	if c > capa {
		retry = -1
	} else if room := mul128(capa-c, p); room.less(debt) {
		retry = debt.minus(room).ceilDiv(q)
	} else {
		allowed = true
		if take && c > 0 && !over {
			if debt = debt.plus(mul128(c, p)); limit.less(debt) {
				debt = limit
			}
			took = true
		}
	}
	// TAT − now = debt/Q: the new state's registers, and Reset.
	dq, dr := debt.divMod(q)
	if took {
		st.A, st.B = now+dq, dr
	}
	reset = dq
	if dr != 0 {
		reset++
	}
	qp, rp := debt.divMod(p) // the units the debt holds: ⌈debt/P⌉
	if rp != 0 {
		qp++
	}
	remaining = max(capa-qp, 0)
	// The window: take what remains, then when does one unit pass. Taking
	// remaining > 0 leaves the debt at capa·P less ⌈debt/P⌉·P − debt,
	// under the cap, so one unit more exceeds (capa − 1)·P by debt mod P,
	// or by P on a multiple of P: a division of 64 bits.
	if remaining > 0 {
		e := p
		if rp != 0 {
			e = rp
		}
		window = ceilDiv(e, q)
	} else if room := mul128(capa-1, p); room.less(debt) {
		window = debt.minus(room).ceilDiv(q)
	}
	return allowed, remaining, reset, retry, window, 0, reset
}

// fastToken is the fast path of TokenBucket (tokenbucket.go): A = tokens ×
// P, refilled Q per µs since B.
func fastToken(take bool, c int64, l *Limit, now int64, st *State) (allowed bool, remaining, reset, retry, window, lease, keep int64) {
	q, capa, p := l.Quota, l.Capacity, l.Period
	full := capa * p
	if st.Ident != l.Ident {
		*st = State{Ident: l.Ident, A: full, B: now, Log: st.Log[:0]}
	}
	st.A = min(st.A, full)
	if now > st.B {
		if hi, lo := bits.Mul64(uint64(now-st.B), uint64(q)); hi != 0 || lo >= uint64(full-st.A) {
			st.A = full
		} else {
			st.A += int64(lo)
		}
		st.B = now
	}
	floor := full - DebtFactor*capa*p
	switch {
	case c > capa:
		retry = -1
	case st.A < c*p:
		retry = st.B + ceilPos(c*p-st.A, q) - now
	default:
		allowed = true
		if take && c > 0 {
			st.A = max(st.A-c*p, floor)
		}
	}
	remaining = unitsIn(st.A, p)
	if st.A < full {
		reset = st.B + ceilPos(full-st.A, q) - now
	}
	a2 := st.A
	if remaining > 0 {
		a2 = max(st.A-remaining*p, floor)
	}
	if a2 < p {
		window = st.B + ceilPos(p-a2, q) - now
	}
	return allowed, remaining, reset, retry, window, 0, reset
}

// fastSliding is the fast path of SlidingWindow (slidingwindow.go): A = the
// current window, B and C the previous and current counts.
func fastSliding(take bool, c int64, l *Limit, now int64, st *State) (allowed bool, remaining, reset, retry, window, lease, keep int64) {
	q, p, tt := l.Quota, l.Period, now
	if st.Ident != l.Ident {
		*st = State{Ident: l.Ident, A: floorDiv(tt, p), Log: st.Log[:0]}
	}
	var e int64 // µs into the current window
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
	// The previous window's weight, rounded up: c passes when
	// cur + c + w ≤ Q (slidingNeed), exact on a wide limit too.
	w := slidingWeight(p, e, st.B)
	switch {
	case c > q:
		retry = -1
	case st.C+c+w > q:
		retry = slidingWait(q, p, st.A, st.B, st.C, c) - now
	default:
		allowed = true
		if take && c > 0 {
			st.C = min(st.C+c, DebtFactor*q)
		}
	}
	remaining = max(q-st.C-w, 0)
	switch {
	case st.C > 0:
		reset = (st.A+2)*p - now
	case st.B > 0:
		reset = (st.A+1)*p - now
	}
	c2 := st.C
	if remaining > 0 {
		c2 = min(st.C+remaining, DebtFactor*q)
	}
	if c2+1+w > q {
		if allowed || c != 1 {
			window = slidingWait(q, p, st.A, st.B, c2, 1) - now
		} else {
			// Denied a unit: nothing was charged, so remaining is 0 and
			// c2 the count Retry, the wait of that unit, was computed on.
			window = retry
		}
	}
	return allowed, remaining, reset, retry, window, 0, reset
}

// fastFixed is the fast path of FixedWindow (fixedwindow.go): A = the
// window, B its count.
func fastFixed(take bool, c int64, l *Limit, now int64, st *State) (allowed bool, remaining, reset, retry, window, lease, keep int64) {
	q, p := l.Quota, l.Period
	if st.Ident != l.Ident {
		*st = State{Ident: l.Ident, A: floorDiv(now, p), Log: st.Log[:0]}
	}
	if now >= (st.A+1)*p {
		st.A, st.B = floorDiv(now, p), 0
	}
	end := (st.A+1)*p - now
	switch {
	case c > q:
		retry = -1
	case st.B+c > q:
		retry = end
	default:
		allowed = true
		if take && c > 0 {
			st.B = min(st.B+c, DebtFactor*q)
		}
	}
	remaining, window = q, end
	if st.B != 0 {
		remaining, reset = max(q-st.B, 0), end
	}
	return allowed, remaining, reset, retry, window, 0, reset
}
