package core

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate/tollgate/core/engine"
)

// A Receipt says where a Take charged its cost: when the store charged it
// and each limit's state right after. Limiter.RefundTo gives units back to
// that state and to no other, so that a refund made later, past a window's
// end, never creates room in a window that did not hold them; Refund,
// without a receipt, gives them to the current window.
//
// What a refund with a receipt gives back, per algorithm (engine.Receipt
// has the arithmetic): a fixed window's units while its window lasts; a
// sliding window's to the window they were counted in (the current one,
// or the previous one, whose weight they carry); a sliding log's to their
// own entry and a bucketed window's to their bucket, while live; a token
// bucket's, GCRA's and a leaky bucket's the part of the charge the bucket
// has not refilled since (all of it while the bucket stays busy; less once
// the bucket, without the charge, would have been full and wasted refill),
// and a leaky bucket's only while its turn is the queue's last: with a
// later request's turn behind it, giving it back would hand that turn out
// a second time, so it passes empty.
// Never more than the receipt's cost, and never more room than undoing
// the charge would give.
//
// Get one with Decision.Receipt. The zero Receipt, and the receipt of a
// Decision that charged nothing (denied, FailOpen, the deny cache's, cost
// 0), refunds nothing. A Receipt is a small value: keep it as long as the
// units may come back.
type Receipt struct {
	at     int64         // the store's time of the charge, Unix µs; 0: nothing charged
	cost   int64         // the cost charged
	reset  time.Duration // one limit: its ResetAfter right after the charge
	states []LimitState  // several limits: theirs
	source Source        // the store that charged: the Limiter's, or the Fallback's
}

// Receipt returns the receipt of d, the Decision of an allowed Take
// (AllowN) or of a Charge: where its cost went. See Receipt.
func (d *Decision) Receipt() Receipt {
	if d.at == 0 || d.Cost <= 0 || d.Source != FromStore && d.Source != FromFallback {
		return Receipt{}
	}
	return Receipt{at: d.at, cost: d.Cost, reset: d.ResetAfter, states: d.States, source: d.Source}
}

// charged sets what d.Receipt needs of d, the Decision of an operation of
// kind made at (Unix µs): at when the operation charged its cost (an
// allowed Take, or a Charge), else nothing.
func (d *Decision) charged(kind engine.Kind, at int64) {
	if kind == engine.Charge || kind == engine.Take && d.Allowed {
		d.at = at
	} else {
		d.at = 0
	}
}

// Charged reports whether r is the receipt of units charged: false for the
// zero Receipt and for a Decision that charged nothing.
func (r Receipt) Charged() bool { return r.at != 0 }

// Cost returns the units r's charge took: the most a refund with it gives
// back.
func (r Receipt) Cost() int64 { return r.cost }

// At returns when r's charge was made, as the store's clock read it; the
// zero Time for a Receipt of nothing.
func (r Receipt) At() time.Time {
	if r.at == 0 {
		return time.Time{}
	}
	return time.UnixMicro(r.at)
}

// engine returns r for the engine. (Its resets are the charge's plan's:
// the engine ignores them under a plan of another number of limits.)
func (r *Receipt) engine() *engine.Receipt {
	er := &engine.Receipt{At: r.at, Cost: r.cost}
	if r.states == nil {
		er.Reset = []int64{resetMicros(r.reset)}
	} else {
		er.Reset = make([]int64, len(r.states))
		for i := range r.states {
			er.Reset[i] = resetMicros(r.states[i].ResetAfter)
		}
	}
	return er
}

// resetMicros returns d in µs, or -1 (unknown) for Never.
func resetMicros(d time.Duration) int64 {
	if d == Never || d < 0 {
		return -1
	}
	return int64(d / time.Microsecond)
}

// RefundTo gives cost back to every limit of key, to the state r's charge
// went into (see Receipt), never more than r's cost: the unused part of an
// estimate, or a failed request, whatever boundary passed since. The
// Decision reports the state after the refund, as Peek would.
//
// Units charged by the Fallback store of the failure policy (a Receipt of
// a Decision FromFallback) go back there, wherever the primary store is by
// then. A Receipt of nothing (Charged false) refunds nothing: RefundTo
// then returns a Decision with Allowed true and no numbers, and no error.
// A negative cost is an error wrapping ErrInvalidCost.
func (l *Limiter) RefundTo(ctx context.Context, key string, r Receipt, cost int64) (Decision, error) {
	if !r.Charged() && cost >= 0 {
		return Decision{Allowed: true, Source: r.source}, nil
	}
	op := engine.Op{Key: key, Kind: engine.Refund, Cost: cost, Receipt: r.engine()}
	if r.source == FromFallback && l.policy.mode == failFallback {
		limits, plan := l.limits, l.plan
		if l.limitsFn != nil {
			var err error
			if limits, plan, err = l.planFor(ctx, key); err != nil {
				return Decision{}, err
			}
		}
		op.Plan = plan
		if err := op.Validate(); err != nil {
			return Decision{}, err
		}
		if l.clock != nil {
			op.Now = l.clock.Now().UnixMicro()
		}
		return l.fallback(ctx, op, limits, errRefundOnFallback, nil)
	}
	return l.op(ctx, op, nil)
}

// errRefundOnFallback is the cause a failing refund on the Fallback store
// reports beside the fallback's own error: the primary store was not
// asked, since the units were not taken there.
var errRefundOnFallback = errors.New("the units were taken on the fallback store")
