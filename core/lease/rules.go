package lease

import (
	"math"
	"math/bits"

	"github.com/tollgate/tollgate/core/engine"
)

// leasable reports whether every limit of plan keeps the guarantee under a
// lease (see the package documentation): FixedWindow, SlidingWindow,
// BucketedWindow, TokenBucket and GCRA. A plan with one other limit
// (SlidingLog, LeakyBucket, Concurrency) is decided per request, whole.
func leasable(plan *engine.Plan) bool {
	for i := range plan.Limits {
		switch plan.Limits[i].Algorithm {
		case engine.FixedWindow, engine.SlidingWindow, engine.BucketedWindow, engine.TokenBucket, engine.GCRA:
		default:
			return false
		}
	}
	return true
}

// capacity returns the largest cost a Take on plan can admit: the least
// capacity of its limits.
func capacity(plan *engine.Plan) int64 {
	c := plan.Limits[0].Capacity
	for i := range plan.Limits[1:] {
		c = min(c, plan.Limits[i+1].Capacity)
	}
	return c
}

// span returns how long (µs from the instant of the operation, in the
// shared store's clock) the held units of an allowed Take whose Result is
// res may be spent, the least over the plan's limits (see the package
// documentation for each rule), and whether every limit's span ends on a
// window boundary (window) rather than a bucket's refill. A span ≤ 0
// means: spend nothing beyond the request that paid for it.
func span(plan *engine.Plan, res *engine.Result, held int64) (sp int64, window bool) {
	window = true
	for i := range plan.Limits {
		l := &plan.Limits[i]
		r := res.Part(i)
		var s int64
		switch l.Algorithm {
		case engine.FixedWindow:
			// Reset is the end of the window ⌊t/P⌋ the charge went into.
			s = r.Reset
		case engine.SlidingWindow:
			// Reset is the end of the window after the charge's: (w+2)·P − t.
			s = r.Reset - l.Period
		case engine.BucketedWindow:
			// Reset is when the newest bucket b leaves the window,
			// (b+n)·p − t: the charge's bucket ends P − p before that.
			s = r.Reset - l.Period + l.Precision
		case engine.TokenBucket, engine.GCRA:
			// Reset is when the bucket is full again: less the refill
			// time of the units held, it is when the bucket plus them
			// would be full; two µs for the rounding up of both terms.
			s = r.Reset - refill(l, held) - 2
			window = false
		default:
			return 0, false
		}
		if i == 0 {
			sp = s
		} else {
			sp = min(sp, s)
		}
	}
	return sp, window
}

// refill returns the µs in which a rated limit refills n units, rounded
// up: ⌈n·P/Q⌉. n ≤ Capacity, whose refill Compile keeps below 2^51 µs;
// n·P may pass 2^63 (a wide limit), so it is computed in 128 bits.
func refill(l *engine.Limit, n int64) int64 {
	n = min(n, l.Capacity)
	hi, lo := bits.Mul64(uint64(n), uint64(l.Period))
	q, r := bits.Div64(hi, lo, uint64(l.Quota))
	if r != 0 {
		q++
	}
	return int64(q)
}

// unit returns the period with which plan's window spans recur (the
// shortest window or bucket of its limits), or 0 when a limit refills
// continuously, or when the plan mixes window sizes.
func unit(plan *engine.Plan) int64 {
	var u int64
	for i := range plan.Limits {
		l := &plan.Limits[i]
		var v int64
		switch l.Algorithm {
		case engine.FixedWindow, engine.SlidingWindow:
			v = l.Period
		case engine.BucketedWindow:
			v = l.Precision
		default:
			return 0
		}
		if u != 0 && v != u {
			return 0
		}
		u = v
	}
	return u
}

// rated reports whether every limit of plan refills continuously
// (TokenBucket, GCRA): their leases can be lengthened by burning units.
func rated(plan *engine.Plan) bool {
	for i := range plan.Limits {
		if a := plan.Limits[i].Algorithm; a != engine.TokenBucket && a != engine.GCRA {
			return false
		}
	}
	return true
}

// refilled returns the units the rated limits of plan refill in d µs,
// rounded up: the most over its limits.
func refilled(plan *engine.Plan, d int64) int64 {
	var n int64
	for i := range plan.Limits {
		l := &plan.Limits[i]
		n = max(n, int64(math.Ceil(float64(d)*float64(l.Quota)/float64(l.Period)))+1)
	}
	return n
}

// fixedOnly reports whether every limit of plan is a FixedWindow.
func fixedOnly(plan *engine.Plan) bool {
	for i := range plan.Limits {
		if plan.Limits[i].Algorithm != engine.FixedWindow {
			return false
		}
	}
	return true
}
