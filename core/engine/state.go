package engine

// shape is a compiled limit and the position of the current call in it.
type shape struct {
	Limit
	tt int64 // now, µs (roll records it)
	e  int64 // SlidingWindow: µs elapsed in window st.A

	lease int64 // Concurrency: the lease a Take acquires (see leaseOf)
	next  int64 // Concurrency: the lease the next Take would acquire, over the plan (see markWindow)
	i     int   // the limit's index in the plan (a Receipt's Reset)
}

// State is the stored state of one limit of one key. Stores keep one State
// per limit and hand them to Step; they need not understand the fields. The
// zero State is a fresh, fully replenished limit, and so is any State whose
// Ident does not match its limit's layout.
//
// The fields' meanings, per algorithm (times are Unix microseconds):
//
//	FixedWindow     A = window number ⌊t/P⌋, B = count
//	SlidingWindow   A = window number ⌊t/P⌋, B = previous count, C = current count
//	SlidingLog      A = sum of Log's costs; Log = (timestamp, cost), oldest first
//	Concurrency     A = sum of Log's costs, B = newest lease issued (µs);
//	                Log = (lease, cost), oldest first
//	BucketedWindow  A = sum of Log's counts; Log = (bucket number ⌊t/p⌋, count), oldest first
//	TokenBucket     A = tokens × P, B = last refill; when wide (Limit.Wide),
//	                as GCRA, with tokens = Burst − max(TAT − t, 0)/T
//	GCRA, LeakyBucket  TAT = A + B/Q, 0 ≤ B < Q
type State struct {
	Ident   uint64 // layout the state was written under (Limit.Ident); 0: fresh
	A, B, C int64  // the algorithm's registers, as tabled above
	Log     []Mark // SlidingLog, BucketedWindow and Concurrency marks, oldest first
}

// Mark is one entry of a State's Log.
type Mark struct {
	At int64 // timestamp (µs) or bucket number
	N  int64 // cost units
}

// fresh resets st to the fully replenished state of sh at now.
func (sh *shape) fresh(st *State, now int64) {
	lease := st.B // a Concurrency limit's newest lease: kept by a Reset
	if st.Ident != sh.Ident {
		lease = 0 // another layout's register
	}
	*st = State{Ident: sh.Ident, Log: st.Log[:0]}
	switch sh.Algorithm {
	case FixedWindow:
		st.A = floorDiv(now, sh.Period)
	case SlidingWindow:
		st.A = floorDiv(now, sh.Period)
	case TokenBucket:
		if sh.Wide {
			st.A = now // GCRA's layout
			break
		}
		st.A = sh.Capacity * sh.Period
		st.B = now
	case GCRA, LeakyBucket:
		st.A = now
	case Concurrency:
		st.B = lease // the newest lease survives a Reset: leases are never reused
	}
}

// debtCap is the most usage a limit can carry: DebtFactor × capacity.
func (sh *shape) debtCap() int64 { return DebtFactor * sh.Capacity }

// roll brings st up to now (dropping what expired, refilling) and records
// the call's position in sh.
func (sh *shape) roll(st *State, now int64) {
	sh.tt = now
	switch sh.Algorithm {
	case FixedWindow:
		fixedRoll(sh, st, now)
	case SlidingWindow:
		slidingRoll(sh, st, now)
	case SlidingLog, Concurrency:
		logRoll(sh, st, now)
	case BucketedWindow:
		bucketRoll(sh, st, now)
	case TokenBucket:
		tokenRoll(sh, st, now)
	default:
		gcraRoll(sh, st, now)
	}
}

// need reports whether cost c can pass now; if not, retry is the time (µs
// from now) until it can, or -1 for never. delay is LeakyBucket's queueing
// delay (µs) when it can pass.
func (sh *shape) need(st *State, now, c int64) (ok bool, retry, delay int64) {
	if c > sh.Capacity {
		return false, -1, 0
	}
	switch sh.Algorithm {
	case FixedWindow:
		ok, retry = fixedNeed(sh, st, now, c)
	case SlidingWindow:
		ok, retry = slidingNeed(sh, st, now, c)
	case SlidingLog, BucketedWindow, Concurrency:
		ok, retry = markNeed(sh, st, now, c)
	case TokenBucket:
		ok, retry = tokenNeed(sh, st, now, c)
	default:
		ok, retry, delay = gcraNeed(sh, st, now, c)
	}
	return ok, retry, delay
}

// add changes usage by d: a charge when d > 0 (saturating at debtCap), a
// refund when d < 0 (never below zero usage). Amounts are clamped first so
// that no product overflows: a charge to debtCap, a refund to debtCap, or
// for SlidingWindow, whose two windows may hold debtCap each, to twice it.
func (sh *shape) add(st *State, now, d int64) {
	m := sh.debtCap()
	if d > m {
		d = m
	} else if sh.Algorithm == SlidingWindow && d < -2*m {
		d = -2 * m
	} else if sh.Algorithm != SlidingWindow && d < -m {
		d = -m
	}
	if d == 0 {
		return
	}
	switch sh.Algorithm {
	case FixedWindow:
		fixedAdd(sh, st, d)
	case SlidingWindow:
		slidingAdd(sh, st, d)
	case SlidingLog:
		markAdd(sh, st, now, d)
	case Concurrency: // only a Take adds: at a lease of its own, never merged
		st.B = max(st.B, sh.lease)
		if d > 0 {
			markAdd(sh, st, sh.lease, d)
		}
	case BucketedWindow:
		markAdd(sh, st, floorDiv(now, sh.Precision), d)
	case TokenBucket:
		tokenAdd(sh, st, d)
	default:
		gcraAdd(sh, st, d)
	}
}

// report returns the units left and the time (µs) until fully replenished.
func (sh *shape) report(st *State, now int64) (remaining, reset int64) {
	switch sh.Algorithm {
	case FixedWindow:
		return fixedReport(sh, st, now)
	case SlidingWindow:
		return slidingReport(sh, st, now)
	case SlidingLog, BucketedWindow, Concurrency:
		return markReport(sh, st, now)
	case TokenBucket:
		return tokenReport(sh, st, now)
	default:
		return gcraReport(sh, st, now)
	}
}
