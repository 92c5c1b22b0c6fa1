package guard

import (
	"context"
	"sync/atomic"
)

// costSlot holds the cost a handler reports, for WithReportedCost.
type costSlot struct {
	n   atomic.Int64
	set atomic.Bool
}

type slotKey struct{}

// ReportCost reports n as the real cost of the request whose context is
// ctx, replacing any cost reported before: after the handler, the Guard
// charges or refunds the difference from the cost it admitted. It reports
// whether ctx belongs to a request of a Guard built with WithReportedCost;
// otherwise it does nothing. It is safe to call from any goroutine until
// the handler returns; a negative n counts as 0.
func ReportCost(ctx context.Context, n int64) bool {
	s, ok := ctx.Value(slotKey{}).(*costSlot)
	if !ok {
		return false
	}
	s.n.Store(n)
	s.set.Store(true)
	return true
}

// AddCost adds n to the real cost of the request whose context is ctx, for
// handlers that count as they go (tokens streamed, rows scanned): the
// first call starts from 0, not from the admitted cost. It reports, as
// ReportCost does, whether ctx carries a cost slot.
func AddCost(ctx context.Context, n int64) bool {
	s, ok := ctx.Value(slotKey{}).(*costSlot)
	if !ok {
		return false
	}
	s.n.Add(n)
	s.set.Store(true)
	return true
}
