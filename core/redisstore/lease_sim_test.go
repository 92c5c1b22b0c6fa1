package redisstore

import (
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease/leasetest"
)

// TestSimulatedLeasedFleets runs the lease package's fleet simulator
// (package leasetest) with the Redis store as the shared store, on a
// virtual clock (every operation carries its Now): fleets with crashes,
// Flushes, fleet-wide Resets, spikes and key floods past WithMaxKeys,
// every admission replayed on the exact single store, on every algorithm
// that leases. Each fleet gets a fresh prefix. Fewer, shorter fleets than
// on a memstore: each request may be a round trip (about 10 s, 30 s with
// the race detector, on 2 cores). (Not TestLeasedFleet…: that prefix runs
// the real-time, multi-process fleets of lease_fleet_test.go.)
func TestSimulatedLeasedFleets(t *testing.T) {
	c := newClient(t)
	leasetest.RunWithOptions(t, func(t *testing.T) core.Store { return newStore(t, c) }, leasetest.Options{Seeds: 4, Steps: 2000})
}
