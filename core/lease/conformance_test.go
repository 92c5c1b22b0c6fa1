package lease_test

import (
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/storetest"
)

// The conformance suite through a lease.Store over a memstore: its traces
// hold leased decisions to never admitting what engine.Step denies.
func TestConformance(t *testing.T) {
	storetest.RunWithOptions(t, func(t *testing.T) core.Store {
		st, err := lease.New(memstore.New(memstore.WithSweepInterval(0)))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, storetest.Options{Leased: true})
}
