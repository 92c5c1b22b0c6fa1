package lease

import (
	"math"
	"runtime"

	"github.com/tollgate/tollgate/core/engine"
)

// The lots of an allowance, ordered by end: lots[0], the front, is spent
// first. Its units live in front, an atomic, so that a Take it covers is
// decided without the allowance's lock (fast); the units of the other lots
// live in lots[i].n, and back is their sum. front goes below zero only for
// an instant, while a Take it did not cover undoes its decrement. The
// allowance's lock is held by every method but fast.

// snapshot is what fast reads to build a Result: the shared state at the
// last reservation, and the units held behind the front.
type snapshot struct {
	res  engine.Result
	at   int64 // local µs of the reservation
	back int64
}

// fast spends cost from the front if it covers it and its lease holds at
// now, without the lock; it reports whether it did, and the Result. opNow
// is the operation's own time (0: the store's clock).
func (a *allowance) fast(cost, now, opNow int64) (engine.Result, bool) {
	if now >= a.frontEnd.Load() || a.front.Load() < cost {
		return engine.Result{}, false
	}
	left := a.front.Add(-cost)
	if left < 0 {
		a.front.Add(cost)
		return engine.Result{}, false
	}
	sn := a.snap.Load()
	if sn == nil { // the first lot's units, published before its snapshot
		a.front.Add(cost)
		return engine.Result{}, false
	}
	held := left + sn.back
	if a.renewing.Load() {
		// While a renewal is in flight, yield now and then: callers
		// that never block would otherwise keep the goroutine that
		// reads its reply (readied by the network poller, queued
		// behind them) from running for tens of milliseconds.
		if left&31 == 0 {
			runtime.Gosched()
		}
	} else if held <= a.lowWater.Load() || now >= a.renewAt.Load() {
		a.s.renew(a, opNow, now)
	}
	return a.result(sn, now, held), true
}

// held returns the units held.
func (a *allowance) held() int64 { return max(a.front.Load(), 0) + a.back }

// swapFront replaces the front's units with n and returns the units it
// had, once no Take is undoing a decrement (so no unit is lost or made).
func (a *allowance) swapFront(n int64) int64 {
	for {
		v := a.front.Load()
		if v >= 0 && a.front.CompareAndSwap(v, n) {
			return v
		}
		runtime.Gosched()
	}
}

// insert adds lot l, in the order of ends.
func (a *allowance) insert(l lot) {
	i := a.nlots
	for i > 0 && a.lots[i-1].end > l.end {
		i--
	}
	a.out += l.n
	if i > 0 {
		copy(a.lots[i+1:a.nlots+1], a.lots[i:a.nlots])
		a.lots[i] = l
		a.back += l.n
	} else {
		// frontEnd is never later than the end of the lot whose units
		// the front holds, so that a fast Take that passed its check
		// spends units still good: an earlier end is published before
		// the swap, a later one after it.
		if a.nlots > 0 { // the front moves behind; l ends sooner
			a.frontEnd.Store(l.end)
			a.lots[0].n = a.swapFront(l.n)
			a.back += a.lots[0].n
			copy(a.lots[1:a.nlots+1], a.lots[:a.nlots])
		} else {
			a.swapFront(l.n)
			a.frontEnd.Store(l.end)
		}
		l.n = 0
		a.lots[0] = l
	}
	a.nlots++
	a.publish()
}

// remove removes lot i and returns it with its unspent units.
func (a *allowance) remove(i int) lot {
	l := a.lots[i]
	if i == 0 {
		if a.nlots > 1 { // the next lot, which ends later, comes forward
			next := a.lots[1].n
			a.back -= next
			a.lots[1].n = 0
			l.n = a.swapFront(next)
			a.frontEnd.Store(a.lots[1].end)
		} else { // nothing is spent from the front any more
			a.frontEnd.Store(0)
			l.n = a.swapFront(0)
		}
	} else {
		a.back -= l.n
	}
	copy(a.lots[i:a.nlots], a.lots[i+1:a.nlots])
	a.nlots--
	a.lots[a.nlots] = lot{}
	a.out -= l.n
	a.publish()
	return l
}

// spend takes cost units from the lots that end first, all or none, and
// reports whether it did. Fast Takes spend the front without the lock
// meanwhile, so units counted as held a moment ago may be gone: a cost the
// front covers is taken from it in one step, and a larger one claims every
// unit held (lots stay, empty), keeps cost of them and restores the rest.
func (a *allowance) spend(cost int64) bool {
	for {
		v := a.front.Load()
		if v < cost {
			break
		}
		if a.front.CompareAndSwap(v, v-cost) {
			return true
		}
	}
	claimed := a.claim()
	var got int64
	for _, c := range claimed {
		got += c.n
	}
	if got < cost {
		a.restore(claimed)
		return false
	}
	for i, left := 0, cost; left > 0; i++ {
		n := min(claimed[i].n, left)
		claimed[i].n -= n
		left -= n
	}
	a.restore(claimed)
	return true
}

// publish makes the current view and back the snapshot fast reads.
func (a *allowance) publish() {
	a.snap.Store(&snapshot{res: a.view, at: a.viewAt, back: a.back})
	a.lowWater.Store(a.slice / 2)
	// A lot that ends by its lease rather than by spending is renewed
	// twice the lag before it ends (window lots are not: a renewal then
	// would end at the same boundary).
	at := int64(math.MaxInt64)
	if a.nlots == 1 && a.lots[0].deadline == 0 {
		at = a.lots[0].end - 2*a.lag - a.s.conf.minLease.Microseconds()
	}
	a.renewAt.Store(at)
}

// A claim is units taken from lot id for a Take that needs more: given
// back to the lot (restore) if the Take is refused.
type claim struct {
	id uint64
	n  int64
}

// claim takes every unit held, lot by lot; the lots stay, empty.
func (a *allowance) claim() []claim {
	if a.held() <= 0 {
		return nil
	}
	var out []claim
	for i := 0; i < a.nlots; i++ {
		var n int64
		if i == 0 {
			n = a.swapFront(0)
		} else {
			n, a.lots[i].n = a.lots[i].n, 0
			a.back -= n
		}
		if n > 0 {
			out = append(out, claim{a.lots[i].id, n})
		}
	}
	a.publish()
	return out
}

// restore gives claimed units back to their lots, if they are still held
// (a lot that ended meanwhile lets them expire).
func (a *allowance) restore(claimed []claim) {
	for _, c := range claimed {
		i := 0
		for i < a.nlots && a.lots[i].id != c.id {
			i++
		}
		switch {
		case i == a.nlots:
			a.s.stats.expired.Add(c.n)
			a.out -= c.n
		case i == 0:
			a.front.Add(c.n)
		default:
			a.lots[i].n += c.n
			a.back += c.n
		}
	}
	if len(claimed) > 0 {
		a.publish()
	}
}
