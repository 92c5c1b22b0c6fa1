package lease

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// maxLots is how many reservations a key holds at once: the one being
// spent and the renewal made before it runs out.
const maxLots = 2

// A lot is the unspent part of one reservation.
type lot struct {
	n        int64 // units unspent
	end      int64 // local µs: spent only before it
	deadline int64 // local µs: given back only before it (window algorithms); 0: any time
	// wend is a window lot's window end (local µs, no later than the
	// shared store's): a fixed window's refund after it does nothing. A
	// lot's lease (end) may end sooner, by MaxLease. 0: not a window lot.
	wend int64
	keep bool // never given back (TokenBucket, GCRA): its units expire
	// receipt says where the reservation's charge went: a give-back
	// refunds there and nowhere else (engine.Receipt). nil when the
	// shared store reports no Result.At.
	receipt *engine.Receipt
	id      uint64
	timer   *time.Timer // real time: gives the lot back when it ends
}

// allowance is one key's lease state at this instance.
type allowance struct {
	s    *Store
	plan *engine.Plan
	key  string

	mu sync.Mutex
	// The lots (lots.go): front and frontEnd are read without the lock.
	lots     [maxLots]lot // ordered by end; lots[0].n is in front
	nlots    int
	front    atomic.Int64
	frontEnd atomic.Int64 // lots[0].end; 0 without lots
	back     int64        // Σ lots[1:].n
	out      int64        // units put in lots and not taken out unspent: spent = out − held
	snap     atomic.Pointer[snapshot]
	lowWater atomic.Int64 // renew ahead once held is at most this
	renewAt  atomic.Int64 // or once it is this late (local µs)
	renewing atomic.Bool  // ahead, for fast
	lag      int64        // µs a reservation of units ahead takes, averaged
	sentAt   int64        // local µs the one in flight was sent
	ids      uint64
	epoch    uint64 // incremented when the allowance is dropped (Reset, eviction)

	// The shared state at the last reservation: Results of local
	// decisions are built from it.
	view   engine.Result
	viewAt int64 // local µs of the reservation

	remaining int64 // least Remaining the shared store reported after the last Take; -1 unknown
	// The span a reservation made now would get: until spanEnd, then, for
	// window algorithms, recurring every spanUnit µs.
	spanEnd, spanUnit int64
	spanKnown         bool

	// Demand: units per µs, an exponentially weighted average of want
	// (units asked since sizedAt) over the intervals between reservations.
	rate    float64
	want    int64 // units asked and not served from lots since sizedAt
	spent   int64 // out − held at sizedAt
	sizedAt int64
	slice   int64 // the last slice reserved ahead: renewed below half of it
	waiting int64 // units of callers waiting on the reservation in flight

	ahead    bool          // a reservation of units ahead is in flight (singleflight)
	done     chan struct{} // closed when it completes
	realTime bool          // operations on the key carry no time: lots end by timers

	// A refused reservation, remembered: Takes of at least denyCost are
	// denied until denyUntil.
	denyUntil, denyCost, denyAt int64
	deny                        *engine.Result // nil until a denial

	last int64 // local µs of the last Take
	gone bool  // evicted
}

// take decides a Take of op.Cost (1 ≤ cost ≤ capacity) on a leasable plan.
func (s *Store) take(ctx context.Context, op *engine.Op) (engine.Result, error) {
	now := s.now(op)
	a := s.lookup(op.Plan, op.Key)
	if a == nil {
		if s.recent != nil && !s.recent.again(op.Plan, op.Key, now) {
			// Not asked about lately: decided by the shared
			// store, as without leases (recent.go). A denial is
			// remembered all the same.
			s.stats.waits.Add(1)
			res, err := s.call(ctx, *op)
			if err == nil && !res.Allowed && res.Retry >= 0 {
				if a := s.entry(op.Plan, op.Key); a != nil {
					a.mu.Lock()
					a.observe(&res, 0, now)
					a.refused(&res, op.Cost, now)
					a.mu.Unlock()
				}
			}
			return res, err
		}
		if a = s.entry(op.Plan, op.Key); a == nil { // a hash collision with other limits: per request
			s.stats.passed.Add(1)
			return s.shared.Apply(ctx, *op)
		}
	}
	if res, ok := a.fast(op.Cost, now, op.Now); ok {
		s.stats.local.Add(1)
		return res, nil
	}
	a.mu.Lock()
	if a.gone { // evicted meanwhile
		a.mu.Unlock()
		return s.take(ctx, op)
	}
	a.last = now
	a.realTime = op.Now == 0 && s.conf.clock == nil
	a.want += op.Cost // demand, served from lots or not (spend takes it back)
	waited := false
	for {
		a.expire(now)
		if a.held() >= op.Cost && a.spend(op.Cost) {
			a.want -= op.Cost // counted as spent
			res := a.local(now)
			renew := a.shouldRenew(now)
			a.mu.Unlock()
			if !waited {
				s.stats.local.Add(1)
			}
			if renew {
				s.renew(a, op.Now, now)
			}
			return res, nil
		}
		if now < a.denyUntil && op.Cost >= a.denyCost {
			res := a.denied(now)
			a.mu.Unlock()
			s.stats.local.Add(1)
			return res, nil
		}
		if !a.ahead {
			break
		}
		// A reservation of units ahead is in flight: wait for it
		// rather than making one more. (Reservations of a request
		// alone go concurrently: waiting for one would gain nothing.)
		if a.done == nil {
			a.done = make(chan struct{})
		}
		ch := a.done
		a.waiting += op.Cost
		a.mu.Unlock()
		if !waited {
			waited = true
			s.stats.waits.Add(1)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			a.mu.Lock()
			a.waiting -= op.Cost
			a.mu.Unlock()
			return engine.Result{}, ctx.Err()
		}
		now = s.now(op)
		a.mu.Lock()
		a.waiting -= op.Cost
		if a.gone {
			a.mu.Unlock()
			return s.take(ctx, op)
		}
	}
	// The units held (fewer than the cost) pay for part of it: the
	// reservation asks for the rest, and gives them back if refused.
	claimed := a.claim()
	extra, burn := a.extra(now, op.Cost)
	// Callers arriving meanwhile wait for a reservation of units ahead,
	// and for a cold key's first, which tells how much is left.
	ahead := extra > 0 || a.remaining < 0
	if ahead {
		a.setAhead(now)
	}
	epoch := a.epoch
	a.mu.Unlock()
	if !waited {
		s.stats.waits.Add(1)
	}
	return s.reserve(ctx, a, op, claimed, ahead, extra, burn, now, epoch)
}

// reserve makes the reservation of a Take that its allowance could not
// cover: the cost less the units claimed from the allowance, plus extra +
// burn units, extra of them to hold; or, refused, the rest of the cost
// alone. sent is the local time the reservation is sent; ahead, whether
// callers may be waiting for it.
func (s *Store) reserve(ctx context.Context, a *allowance, op *engine.Op, claimed []claim, ahead bool, extra, burn, sent int64, epoch uint64) (engine.Result, error) {
	s.track.add()
	defer s.track.done()
	need := op.Cost
	for _, c := range claimed {
		need -= c.n
	}
	res, err := s.call(ctx, engine.Op{Plan: op.Plan, Key: op.Key, Kind: engine.Take, Cost: need + extra + burn, Now: op.Now})
	if err == nil && !res.Allowed && extra > 0 {
		// The slice is refused: ask for the request alone, which may
		// still pass.
		extra, burn = 0, 0
		res, err = s.call(ctx, engine.Op{Plan: op.Plan, Key: op.Key, Kind: engine.Take, Cost: need, Now: op.Now})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ahead {
		a.clearAhead(s.now(op))
	}
	if err != nil || !res.Allowed {
		a.restore(claimed)
	}
	if err != nil {
		return engine.Result{}, err
	}
	a.observe(&res, extra, sent)
	if !res.Allowed {
		if res.Retry >= 0 && len(claimed) == 0 {
			a.refused(&res, op.Cost, sent)
		}
		addHeld(op.Plan, &res, a.held(), true)
		return res, nil
	}
	a.denyUntil = 0
	a.setView(&res, sent)
	s.stats.burned.Add(burn)
	if extra > 0 {
		a.addLot(extra, &res, need+extra+burn, sent, epoch, op.Now)
	}
	return a.local(sent), nil
}

// refused remembers res, the shared store's denial of a Take of cost sent
// at sent: Takes of at least cost are denied in process until its Retry
// (at most a lease later).
func (a *allowance) refused(res *engine.Result, cost, sent int64) {
	a.denyUntil = sent + min(res.Retry, a.s.conf.maxLease.Microseconds())
	a.denyCost, a.denyAt = cost, sent
	d := *res
	d.Limits = append([]engine.LimitResult(nil), res.Limits...)
	a.deny = &d
}

// call runs op on the shared store; after Close, only give-backs.
func (s *Store) call(ctx context.Context, op engine.Op) (engine.Result, error) {
	if s.closed.Load() && op.Kind != engine.Refund {
		return engine.Result{}, fmt.Errorf("lease: %s: %w", op.Kind, core.ErrClosed)
	}
	if op.Kind == engine.Take {
		s.stats.reservations.Add(1)
	}
	return s.shared.Apply(ctx, op)
}

// renew reserves the next slice of a's key off the request path, at now
// (opNow is the time of the operation that found the allowance low: 0 for
// the store's clock).
func (s *Store) renew(a *allowance, opNow, now int64) {
	a.mu.Lock()
	if !a.shouldRenew(now) || s.closed.Load() {
		a.mu.Unlock()
		return
	}
	extra, burn := a.extra(now, 0)
	if extra <= 0 {
		a.slice = 0
		a.lowWater.Store(0)
		a.renewAt.Store(math.MaxInt64)
		a.mu.Unlock()
		return
	}
	a.setAhead(now)
	epoch := a.epoch
	a.mu.Unlock()
	s.track.add()
	go func() {
		defer s.track.done()
		ctx, cancel := context.WithTimeout(context.Background(), s.conf.timeout)
		defer cancel()
		res, err := s.call(ctx, engine.Op{Plan: a.plan, Key: a.key, Kind: engine.Take, Cost: extra + burn, Now: opNow})
		a.mu.Lock()
		defer a.mu.Unlock()
		a.clearAhead(s.now(&engine.Op{Now: opNow}))
		if err != nil {
			return // the next request that needs units asks for itself
		}
		a.observe(&res, extra, now)
		if res.Allowed {
			s.stats.burned.Add(burn)
			a.setView(&res, now)
			a.addLot(extra, &res, extra+burn, now, epoch, opNow)
		}
	}()
}

// shouldRenew reports whether a's allowance is low enough, or its front
// lot near enough its end, to renew ahead at now.
func (a *allowance) shouldRenew(now int64) bool {
	return !a.ahead && a.nlots < maxLots && a.slice > 0 && (a.held() <= a.slice/2 || now >= a.renewAt.Load())
}

// setAhead marks a reservation of units ahead, sent at now, in flight;
// clearAhead its end at now, waking the callers waiting for it, and
// measures how long it took (scheduling included: a loaded process takes
// longer to act on the answer than the store to give it).
func (a *allowance) setAhead(now int64) {
	a.ahead, a.sentAt = true, now
	a.renewing.Store(true)
}

func (a *allowance) clearAhead(now int64) {
	if d := now - a.sentAt; d >= 0 {
		a.lag += (d - a.lag) / 4
	}
	a.ahead = false
	a.renewing.Store(false)
	if a.done != nil { // made by the first caller to wait
		close(a.done)
		a.done = nil
	}
}

// extra returns how many units beyond cost to reserve now (see the package
// documentation): x to hold, the key's recent demand over a renew interval
// plus the units of callers waiting, capped by a share of the shared
// remaining and by the capacity; and, for a token bucket or GCRA whose
// lease would be too short, burn, the units that lengthen it to a renew
// interval. x is 0 when a reservation made now would be too short.
func (a *allowance) extra(now, cost int64) (x, burn int64) {
	c := &a.s.conf
	spent := a.out - a.held()
	switch {
	case a.sizedAt == 0:
		a.sizedAt, a.want, a.spent = now, 0, spent
	case now > a.sizedAt:
		el := float64(now - a.sizedAt)
		inst := float64(a.want+spent-a.spent) / el
		if alpha := el / float64(4*c.renew.Microseconds()); a.rate == 0 || alpha >= 1 {
			a.rate = inst
		} else {
			a.rate += alpha * (inst - a.rate)
		}
		a.sizedAt, a.want, a.spent = now, 0, spent
	}
	if a.remaining < 0 {
		return 0, 0 // nothing known of the shared state yet: the first request goes alone
	}
	// Demand over the renew interval, or over the lease when it is
	// shorter: units a lease cannot spend are stranded until it ends.
	sp, target := a.span(now), c.renew.Microseconds()
	cover := max(target, 8*a.lag) // renewed at half: four lags ahead
	if !rated(a.plan) {
		cover = min(cover, sp)
	}
	x = max(int64(a.rate*float64(cover)), c.minSlice) + a.waiting
	x = min(x, int64(c.share*float64(a.remaining)), capacity(a.plan)-cost)
	if x <= 0 {
		return 0, 0
	}
	if sp >= cover || (sp >= c.minLease.Microseconds() && !rated(a.plan)) {
		return x, 0
	}
	if !rated(a.plan) || len(a.plan.Limits) > 1 {
		return 0, 0 // a burn would charge every limit at the rate of one
	}
	burn = refilled(a.plan, cover-max(sp, 0))
	if cost+x+burn > capacity(a.plan) || x+burn > int64(c.share*float64(a.remaining)) {
		return 0, 0
	}
	return x, burn
}

// span returns how long a reservation made now would last, as predicted
// from the last one.
func (a *allowance) span(now int64) int64 {
	switch {
	case !a.spanKnown:
		return a.s.conf.maxLease.Microseconds()
	case now < a.spanEnd:
		return a.spanEnd - now
	case a.spanUnit > 0:
		return a.spanUnit - (now-a.spanEnd)%a.spanUnit
	}
	return 0
}

// observe records what the shared store's answer res to a Take, sent at
// local time sent, to hold held units, says of the shared state.
func (a *allowance) observe(res *engine.Result, held, sent int64) {
	a.remaining = res.Remaining
	for i := range res.Limits {
		a.remaining = min(a.remaining, res.Limits[i].Remaining)
	}
	if !res.Allowed {
		return
	}
	sp, window := span(a.plan, res, held)
	a.spanEnd, a.spanKnown, a.spanUnit = sent+sp, true, 0
	if window {
		a.spanUnit = unit(a.plan)
	}
}

// setView makes res, the answer to a reservation sent at sent, the shared
// state local decisions report.
func (a *allowance) setView(res *engine.Result, sent int64) {
	a.view = *res
	a.view.Limits = append(a.view.Limits[:0:0], res.Limits...)
	a.viewAt = sent
	if a.nlots > 0 {
		a.publish()
	}
}

// addLot keeps units of the reservation of cost answered by res (sent at
// sent) for later requests, unless the lease they would get is too short,
// or the allowance was dropped since (epoch).
func (a *allowance) addLot(units int64, res *engine.Result, cost, sent int64, epoch uint64, opNow int64) {
	s := a.s
	sp, window := span(a.plan, res, units)
	l := lot{n: units, keep: !window, end: sent + sp}
	if window {
		l.wend = l.end
	}
	switch {
	case res.At > 0:
		// A refund with the charge's receipt goes where the charge
		// went, or nowhere: it is safe at any time.
		rc := engine.ReceiptOf(res, cost)
		l.receipt = &rc
	case window:
		// Without a receipt, a refund lands in the current window:
		// it is given back before the window ends, by a refund
		// bounded by that deadline, and spending stops a margin
		// earlier, so that a give-back has the margin to arrive.
		l.deadline = l.end
		l.end -= s.conf.minLease.Microseconds() / 2
	}
	l.end = min(l.end, sent+s.conf.maxLease.Microseconds())
	switch {
	case epoch != a.epoch:
		// Reset or evicted while the reservation was in flight: its
		// units may predate the reset, and giving them back could
		// create room the fresh state never had. They expire.
		s.stats.expired.Add(units)
		return
	case l.end-sent < s.conf.minLease.Microseconds() || a.nlots == maxLots || s.closed.Load():
		s.giveBack(a, []lot{l}, opNow)
		return
	}
	a.slice = units
	a.ids++
	l.id = a.ids
	if a.realTime {
		id, d := l.id, time.Duration(l.end-sent)*time.Microsecond
		l.timer = time.AfterFunc(d, func() { s.lotEnded(a, id) })
	}
	a.insert(l)
}

// lotEnded gives back lot id of a, if it is still held: its timer fired.
func (s *Store) lotEnded(a *allowance, id uint64) {
	a.mu.Lock()
	var out []lot
	for i := 0; i < a.nlots; i++ {
		if a.lots[i].id == id {
			out = append(out, a.remove(i))
			break
		}
	}
	a.mu.Unlock()
	if len(out) > 0 {
		s.giveBack(a, out, 0)
	}
}

// expire ends the lots whose lease ended by now, giving their units back
// when that is still safe.
func (a *allowance) expire(now int64) {
	for a.nlots > 0 && a.front.Load() <= 0 && a.lots[0].end > now { // spent
		if l := a.remove(0); l.timer != nil {
			l.timer.Stop()
		}
	}
	k := 0
	for k < a.nlots && a.lots[k].end <= now {
		k++
	}
	if k == 0 {
		return
	}
	out := make([]lot, k)
	for i := range out {
		out[i] = a.remove(0)
	}
	a.s.giveBack(a, out, a.lastNow(now))
}

// lastNow returns the time to carry on an operation made for a key whose
// operations carry their time (now), or 0 for the store's clock.
func (a *allowance) lastNow(now int64) int64 {
	if a.realTime {
		return 0
	}
	return now
}

// takeLots removes every lot and returns them.
func (a *allowance) takeLots() []lot {
	out := make([]lot, a.nlots)
	for i := range out {
		out[i] = a.remove(0)
	}
	return out
}

// drop forgets a's allowance and remembered denial (a Reset): its units
// are not given back, since the Reset replenishes the key anyway, and a
// refund after it would create room the fresh state never had.
func (s *Store) drop(a *allowance) {
	a.mu.Lock()
	lots := a.takeLots()
	a.epoch++
	a.denyUntil = 0
	a.remaining, a.spanKnown, a.slice = -1, false, 0
	a.mu.Unlock()
	for _, l := range lots {
		if l.timer != nil {
			l.timer.Stop()
		}
		s.stats.expired.Add(l.n)
	}
}

// giveBack refunds the units of lots to the shared store, in the
// background. A lot of a window algorithm is given back only before its
// deadline (the end of its window), by a refund bounded by that deadline;
// else its units expire with their window.
func (s *Store) giveBack(a *allowance, lots []lot, opNow int64) {
	for _, l := range lots {
		if l.timer != nil {
			l.timer.Stop()
		}
		if l.n <= 0 {
			continue
		}
		now := s.now(&engine.Op{Now: opNow})
		if l.keep || l.deadline != 0 && now >= l.deadline || l.receipt != nil && l.wend != 0 && now >= l.wend && fixedOnly(a.plan) {
			s.stats.expired.Add(l.n) // (a fixed window's units past its window's end: nothing to give back)
			continue
		}
		var deadline time.Time
		if l.deadline != 0 && opNow == 0 && s.conf.clock == nil {
			// The shared store refuses work past the caller's deadline
			// (the Redis store converts it to its clock, never later),
			// so the refund lands before the window ends, or not at all.
			deadline = time.Now().Add(time.Duration(l.deadline-now) * time.Microsecond)
		}
		s.track.add()
		go func(l lot) {
			defer s.track.done()
			ctx, cancel := context.WithTimeout(context.Background(), s.conf.timeout)
			if !deadline.IsZero() {
				d := deadline
				var c2 context.CancelFunc
				ctx, c2 = context.WithDeadline(ctx, d)
				defer c2()
			}
			defer cancel()
			_, err := s.call(ctx, engine.Op{Plan: a.plan, Key: a.key, Kind: engine.Refund, Cost: l.n, Now: opNow, Receipt: l.receipt})
			if err != nil {
				s.stats.expired.Add(l.n)
				return
			}
			s.stats.giveBacks.Add(1)
			s.stats.returned.Add(l.n)
		}(l)
	}
}

// local returns the Result of a Take decided from a's allowance at now.
func (a *allowance) local(now int64) engine.Result {
	return a.result(&snapshot{res: a.view, at: a.viewAt}, now, a.held())
}

// result returns the Result of a Take decided in process at now, with held
// units left: the shared state at the last reservation (sn), its times
// less the time since, with the units held counted as remaining.
func (a *allowance) result(sn *snapshot, now, held int64) engine.Result {
	r := sn.res
	el := max(now-sn.at, 0)
	r.Allowed, r.Retry, r.Delay, r.Lease = true, 0, 0, 0
	r.Reset, r.Window = max(r.Reset-el, 0), max(r.Window-el, 0)
	if len(r.Limits) > 0 {
		r.Limits = append([]engine.LimitResult(nil), r.Limits...)
		for i := range r.Limits {
			p := &r.Limits[i]
			p.Allowed, p.Retry, p.Delay = true, 0, 0
			p.Reset, p.Window = max(p.Reset-el, 0), max(p.Window-el, 0)
		}
	}
	addHeld(a.plan, &r, held, true)
	return r
}

// denied returns the remembered denial at now.
func (a *allowance) denied(now int64) engine.Result {
	r := *a.deny
	el := max(now-a.denyAt, 0)
	r.Retry, r.Reset, r.Window = max(r.Retry-el, 0), max(r.Reset-el, 0), max(r.Window-el, 0)
	if len(r.Limits) > 0 {
		r.Limits = append([]engine.LimitResult(nil), r.Limits...)
		for i := range r.Limits {
			p := &r.Limits[i]
			p.Reset, p.Window = max(p.Reset-el, 0), max(p.Window-el, 0)
			if !p.Allowed {
				p.Retry = max(p.Retry-el, 0)
			}
		}
	}
	addHeld(a.plan, &r, a.held(), true)
	return r
}
