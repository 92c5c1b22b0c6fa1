package bench

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// tollgateLimiter is Tollgate as its users write it: core.New on a
// memstore.New() with default options and one limit, called through
// Limiter.Allow: of the default algorithm (SlidingWindow), or of GCRA or
// TokenBucket (newTollgateOf).
type tollgateLimiter struct {
	l  *core.Limiter
	st *memstore.Store
}

func newTollgate(tb testing.TB, s scenario) decider { return newTollgateOf(tb, s, core.SlidingWindow) }

// newTollgateOf returns Tollgate with a limit of algorithm a.
func newTollgateOf(tb testing.TB, s scenario, a core.Algorithm) decider {
	st := memstore.New()
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("memstore Close: %v", err)
		}
	})
	quota, period, burst := s.limit()
	limit := core.Per(quota, period).WithAlgorithm(a)
	if a.HasBurst() {
		limit = limit.WithBurst(burst)
	}
	l, err := core.New(st, limit)
	if err != nil {
		tb.Fatalf("core.New: %v", err)
	}
	return &tollgateLimiter{l, st}
}

func (t *tollgateLimiter) entries() int { return t.st.Len() }

func (t *tollgateLimiter) allow(ctx context.Context, key string) (bool, error) {
	d, err := t.l.Allow(ctx, key)
	return d.Allowed, err
}
