package guard

import (
	"context"
	"math"
	"sync/atomic"
)

// costSlot holds the cost a handler reports, for WithReportedCost.
type costSlot struct {
	n   atomic.Int64 // ≥ 0
	set atomic.Bool
}

type slotKey struct{}

// ReportCost reports n as the real cost of the request whose context is
// ctx, replacing any cost reported before: after the handler, the Guard
// charges or refunds the difference from the cost it admitted. A negative
// n counts as 0. It reports whether ctx belongs to a request of a Guard
// built with WithReportedCost; otherwise it does nothing. It is safe to
// call from any goroutine until the handler returns.
func ReportCost(ctx context.Context, n int64) bool {
	s, ok := ctx.Value(slotKey{}).(*costSlot)
	if !ok {
		return false
	}
	s.n.Store(max(n, 0))
	s.set.Store(true)
	return true
}

// AddCost adds n to the real cost of the request whose context is ctx, for
// handlers that count as they go (tokens streamed, rows scanned): the
// first call starts from 0, not from the admitted cost. The total
// saturates at math.MaxInt64 rather than wrapping around, and, as in
// ReportCost, a negative n counts as 0: a real cost only grows (use
// ReportCost to replace it). It reports, as ReportCost does, whether ctx
// carries a cost slot, and is safe to call from any goroutine until the
// handler returns.
func AddCost(ctx context.Context, n int64) bool {
	s, ok := ctx.Value(slotKey{}).(*costSlot)
	if !ok {
		return false
	}
	if n > 0 {
		for {
			old := s.n.Load()
			sum := old + n
			if sum < old { // both are ≥ 0: an overflow
				sum = math.MaxInt64
			}
			if s.n.CompareAndSwap(old, sum) {
				break
			}
		}
	}
	s.set.Store(true)
	return true
}
