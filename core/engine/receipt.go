package engine

// A Receipt says where a charge went, so that a Refund of it (Op.Receipt)
// gives units back to the state that took them and to no other: a refund
// made later, in another window, must not create room that was never
// taken there. Build one from the Result of the Take (or Charge) with
// ReceiptOf.
//
// With a receipt, a Refund of r units gives back, on each limit, at most
// min(r, Cost), and only what undoing the charge would give back now:
//
//	FixedWindow     r from the count, if the charge's window ⌊At/P⌋ is the
//	                current one; nothing once it has passed
//	SlidingWindow   r from the current window's count if the charge is in
//	                it, else from the previous window's (which weighs
//	                (P−e)/P now, as the charge did), else nothing: exact
//	SlidingLog      r from the charge's own mark (timestamp At), if live
//	BucketedWindow  r from the charge's bucket ⌊At/p⌋, if live
//	TokenBucket,    the part of the charge the bucket has not yet refilled:
//	GCRA,           min(r·T, Due − now), T = P/Q, where Due is when the
//	LeakyBucket     charge alone would have been repaid: TAT right after
//	                it (GCRA), or now + deficit/rate (TokenBucket); for a
//	                LeakyBucket, only while the charge is the queue's
//	                last (TAT ≤ Due: see queueTail), else nothing
//
// For the rated algorithms, "as if it had never been taken" once the
// bucket has refilled since the charge means this. Removing the charge
// from the history lowers every later TAT (GCRA's theoretical arrival
// time; a token bucket is the same machine) by c·T until the bucket,
// without the charge, would have been full at some request: from then on
// the two histories agree. TAT after later requests is the largest of
// (s_k + the cost taken from request k on)·T over the requests k, so
// without the charge it is at most Due + (later costs)·T or now + (later
// costs)·T, and TAT with it is at least Due + (later costs)·T: the
// difference, the room undoing the charge would give back now, is at
// least min(c·T, Due − now). That is what the refund gives, never more:
// exact for a refund with no request between, and when the bucket was
// busy throughout; less only when a bucket near full refilled past the
// charge (a refill it wasted on being full, which the refund cannot
// recover without a log of every request). Due comes from the Result's
// Reset (right after the charge, Due = At + Reset, rounded up to a µs, so
// the refund counts it one rounding unit earlier) and at least At + c·T
// when Reset is unknown.
//
// Concurrency limits hold no refundable units (see Release). A Refund
// without a receipt keeps its older meaning: the units go back to the
// current state (the current window first, the newest marks first),
// which can create room in a window that never held them; use it only for
// units taken in the current window.
type Receipt struct {
	// At is when the charge was made, Unix µs (Result.At): the time the
	// store decided at. Required: at least 1.
	At int64
	// Span, when not 0, says At is uncertain: the charge was made at some
	// time in [At−Span, At]. The refund then goes to the oldest place the
	// charge could be in, which is never more permissive (a unit given
	// back to an older window or mark would have expired sooner), and uses
	// At−Span for the rated algorithms, ignoring Reset; a LeakyBucket then
	// gives nothing back, since whether the charge is still the queue's
	// last is unknown without its Reset (see queueTail). Default 0: exact.
	Span int64
	// Cost is the cost the charge took, the most the refund gives back.
	Cost int64
	// Reset holds each limit's Reset right after the charge (µs), in the
	// plan's order, for the rated algorithms; nil when unknown. A value
	// below 0 is unknown too, and so is every value when their number is
	// not the plan's (a refund under other limits than the charge's).
	Reset []int64
}

// ReceiptOf returns the receipt of a Take or Charge of cost whose Result is
// res. Its Reset holds res's (one limit) or each of res.Limits'.
func ReceiptOf(res *Result, cost int64) Receipt {
	r := Receipt{At: res.At, Cost: cost}
	if len(res.Limits) > 0 {
		r.Reset = make([]int64, len(res.Limits))
		for i := range res.Limits {
			r.Reset[i] = res.Limits[i].Reset
		}
	} else {
		r.Reset = []int64{res.Reset}
	}
	return r
}

// valid reports whether rc is well formed.
func (rc *Receipt) valid() bool {
	return rc.At > 0 && rc.Span >= 0 && rc.Span <= rc.At && rc.Cost >= 0
}

// reset returns the Reset of limit i, or -1 when unknown or uncertain.
func (rc *Receipt) reset(i, n int) int64 {
	if rc.Span != 0 || len(rc.Reset) != n {
		return -1
	}
	return rc.Reset[i]
}

// giveBack applies a Refund of r units (> 0) with receipt rc to st, rolled
// to now; reset is the limit's Reset right after the charge, or -1.
func (sh *shape) giveBack(st *State, now, r int64, rc *Receipt, reset int64) {
	r = min(r, rc.Cost, sh.debtCap())
	if r <= 0 {
		return
	}
	lo := rc.At - rc.Span // the oldest instant the charge can have been made
	switch sh.Algorithm {
	case FixedWindow:
		if floorDiv(lo, sh.Period) == st.A {
			st.B = max(st.B-r, 0)
		}
	case SlidingWindow:
		switch floorDiv(lo, sh.Period) {
		case st.A:
			st.C = max(st.C-r, 0)
		case st.A - 1:
			st.B = max(st.B-r, 0)
		}
	case SlidingLog:
		markBack(st, lo, rc.At, r)
	case BucketedWindow:
		markBack(st, floorDiv(lo, sh.Precision), floorDiv(rc.At, sh.Precision), r)
	case TokenBucket, GCRA, LeakyBucket:
		if sh.Algorithm == LeakyBucket && !queueTail(st, lo, reset) {
			return // a later request's turn is behind the charge's
		}
		if sh.Wide {
			if x := sh.wideCredit(r, lo, reset); x != (u128{}) {
				wideBack(sh, st, x)
			}
			return
		}
		x := sh.credit(now, r, lo, reset)
		if x <= 0 {
			return
		}
		if sh.Algorithm == TokenBucket {
			st.A = min(st.A+x, sh.Capacity*sh.Period)
		} else {
			num := st.B - x
			st.A, st.B = st.A+floorDiv(num, sh.Quota), floorMod(num, sh.Quota)
			if st.A < sh.tt {
				st.A, st.B = sh.tt, 0
			}
		}
	}
}

// queueTail reports whether the charge of a LeakyBucket's receipt, made at
// lo with reset its Reset right after, is still the last in the queue:
// no later charge has moved TAT past the charge's own, lo + reset (a µs
// rounded up). Giving back a charge with later requests' turns behind it
// would move TAT back over those turns, and the next request would be
// given one of them: two requests would leave at once. Such a charge's
// turn passes empty instead. An
// unknown reset (≤ 0: a receipt with a Span, or of other limits) cannot
// tell, and gives nothing back either. Due is rounded up to a µs, so a
// later charge that moved TAT by less than that is not seen: turns closer
// than a µs apart, which no Delay tells apart.
func queueTail(st *State, lo, reset int64) bool {
	if reset <= 0 {
		return false
	}
	due := lo + reset
	return st.A < due || st.A == due && st.B == 0
}

// markBack takes up to r units from the oldest live mark positioned in
// [lo, hi]: the charge's own, or (hi > lo) the oldest it can be.
func markBack(st *State, lo, hi, r int64) {
	for i := range st.Log {
		m := &st.Log[i]
		if m.At < lo {
			continue
		}
		if m.At <= hi {
			x := min(m.N, r)
			m.N -= x
			st.A -= x
			if m.N == 0 {
				st.Log = append(st.Log[:i], st.Log[i+1:]...)
			}
		}
		return
	}
}

// credit returns what a refund of r units of a charge made at lo (µs) may
// give back to a rated limit now, in its units (tokens × P, or Q × TAT):
// min(r·P, Due − now) scaled by Q, where Due is known from reset (the
// Reset right after the charge; -1: unknown) and is at least lo + r·T.
// Every product stays within 2^53 on a limit that is not wide (a wide one
// takes wideCredit): r·P ≤ DebtFactor·capacity·P.
//
// The refill since the charge is at most (now − lo)·Q, so
// Q·(Due − now) ≥ r·P − that (the decay bound). From reset: lo + reset is
// ⌈deficit/Q⌉ µs after the charge, so Q·Due ≥ (lo + reset − 1)·Q + 1.
func (sh *shape) credit(now, r, lo, reset int64) int64 {
	q, rp := sh.Quota, r*sh.Period
	x := int64(0)
	// The decay bound.
	if d := max(sh.tt-lo, 0); d <= rp/q {
		x = rp - d*q
	}
	// The bound from reset.
	if reset > 0 {
		k := lo + reset - 1 - sh.tt // µs from now to Due, less one
		switch {
		case k > rp/q+1:
			x = rp
		case k >= 0:
			x = max(x, k*q+1)
		}
	}
	return min(x, rp)
}
