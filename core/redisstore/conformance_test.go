package redisstore

import (
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/storetest"
)

// TestConformance runs the storetest suite, which holds every decision to
// core.Step's, against the store with each call its own round trip, with
// batching, and with the generic script only (no layout specialized).
func TestConformance(t *testing.T) {
	c := newClient(t)
	o := storetest.Options{Traces: 40, Goroutines: 32, Attempts: 100}
	t.Run("unbatched", func(t *testing.T) {
		storetest.RunWithOptions(t, func(t *testing.T) core.Store { return newStore(t, c, WithBatching(0, 0)) }, o)
	})
	t.Run("batched", func(t *testing.T) {
		storetest.RunWithOptions(t, func(t *testing.T) core.Store { return newStore(t, c, WithBatching(64, 4)) }, o)
	})
	t.Run("generic", func(t *testing.T) {
		storetest.RunWithOptions(t, func(t *testing.T) core.Store {
			s := newStore(t, c)
			s.maxScripts = 0
			return s
		}, o)
	})
}
