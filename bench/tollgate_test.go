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
	// A hundred million a second, ten times what one core asks for a key
	// (a decision takes about 100 ns), so that no run is denied however long
	// it lasts; and below 2^47µs for Capacity × Period, so that Tollgate
	// counts time in exact µs ticks, as for any real limit of a web
	// service. (The peers' billion a second would take coarse ticks; until
	// the night session of 2026-11-23 this was ten million, which a hot key
	// asked for a whole second at full speed could reach.)
	limit := core.PerSecond(100_000_000)
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
