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
type tollgateLimiter struct{ l *core.Limiter }

func newTollgate(tb testing.TB, s scenario) decider { return newTollgateOf(tb, s, core.SlidingWindow) }

// newTollgateOf returns Tollgate with a limit of algorithm a.
func newTollgateOf(tb testing.TB, s scenario, a core.Algorithm) decider {
	st := memstore.New()
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("memstore Close: %v", err)
		}
	})
	// Ten million a second, far above what one core asks for a key: the
	// peers' billion a second would, for Tollgate, count time in coarse ticks
	// (Capacity × Period above 2^47µs), which no real limit of a web service
	// does.
	limit := core.PerSecond(10_000_000)
	if s == denyAfterOne {
		limit = core.PerHour(1)
	}
	l, err := core.New(st, limit.WithAlgorithm(a))
	if err != nil {
		tb.Fatalf("core.New: %v", err)
	}
	return tollgateLimiter{l}
}

func (t tollgateLimiter) allow(ctx context.Context, key string) (bool, error) {
	d, err := t.l.Allow(ctx, key)
	return d.Allowed, err
}
