package bench

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// tollgateLimiter is Tollgate as its users write it: core.New on a
// memstore.New() with default options and one limit of the default
// algorithm (SlidingWindow), called through Limiter.Allow.
type tollgateLimiter struct{ l *core.Limiter }

func newTollgate(tb testing.TB, s scenario) decider {
	st := memstore.New()
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("memstore Close: %v", err)
		}
	})
	limit := core.PerSecond(1e9)
	if s == denyAfterOne {
		limit = core.PerHour(1)
	}
	l, err := core.New(st, limit)
	if err != nil {
		tb.Fatalf("core.New: %v", err)
	}
	return tollgateLimiter{l}
}

func (t tollgateLimiter) allow(ctx context.Context, key string) (bool, error) {
	d, err := t.l.Allow(ctx, key)
	return d.Allowed, err
}
