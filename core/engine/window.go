package engine

// The effective window (draft-ietf-httpapi-ratelimit-headers-11 §4.1.2,
// t: "the number of seconds within which the client can use no more than
// the available quota").
//
// With r the units remaining, the longest such span is the time until one
// more unit would pass had the client taken all r at once now: before it,
// no sequence of requests gets more than r through; at it, r + 1 can. So
// window takes r on a copy of the state and asks when a cost of 1 passes.
// For a fixed window that is the window's end; for a sliding window, when
// the weight of the windows has dropped by a unit; for a token bucket or
// GCRA, when the fraction of a unit left after taking r has grown to one.

// window returns the effective window of st (rolled to now, after the
// operation) with remaining units left, in µs (-1: never).
func (sh *shape) window(st *State, now, remaining int64) int64 {
	switch sh.Algorithm {
	case FixedWindow:
		return (st.A+1)*sh.Period - now
	case SlidingLog, BucketedWindow, Concurrency:
		return markWindow(sh, st, now, remaining)
	}
	c := *st // no log: a copy is independent
	if remaining > 0 {
		sh.add(&c, now, remaining)
	}
	ok, retry, _ := sh.need(&c, now, 1)
	if ok {
		return 0 // not after taking what Remaining reports (it is floored)
	}
	return retry
}

// markWindow is window for SlidingLog, BucketedWindow and Concurrency:
// taking remaining fills the log to the quota, and one more unit passes
// when its oldest mark expires: the first one, or, for an empty log, the
// mark taking remaining would add now (for Concurrency, at the lease it
// would acquire: one µs past the newest any of the plan's Concurrency
// limits issued, when that is not before now). With nothing remaining,
// when the excess over the quota has expired.
func markWindow(sh *shape, st *State, now, remaining int64) int64 {
	if remaining == 0 {
		_, retry := markNeed(sh, st, now, 1)
		return retry
	}
	if len(st.Log) > 0 {
		return markExpiry(sh, st.Log[0]) - now
	}
	at := now
	switch sh.Algorithm {
	case BucketedWindow:
		at = floorDiv(now, sh.Precision)
	case Concurrency: // the lease that Take would acquire, over every limit of the plan
		at = max(now, sh.next)
	}
	return markExpiry(sh, Mark{At: at}) - now
}
