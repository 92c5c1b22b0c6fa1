package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/lease"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/storetest"
)

// t0 is a minute boundary: epoch-aligned windows of a second, a minute
// (and 100ms) start on it.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixMicro()

const ms = int64(1000) // µs

// leasable are the algorithms that lease.
var leasable = []core.Algorithm{core.FixedWindow, core.SlidingWindow, core.BucketedWindow, core.TokenBucket, core.GCRA}

// newShared returns a memstore without its sweeper, closed at the end of
// the test.
func newShared(t *testing.T) *memstore.Store {
	t.Helper()
	st := memstore.New(memstore.WithSweepInterval(0))
	t.Cleanup(func() { st.Close() })
	return st
}

// newLease returns a lease.Store over shared, which it does not close
// (tests close shared themselves).
func newLease(t *testing.T, shared core.Store, opts ...lease.Option) *lease.Store {
	t.Helper()
	ls, err := lease.New(noClose{shared}, opts...)
	if err != nil {
		t.Fatalf("lease.New: %v", err)
	}
	return ls
}

// noClose is a store whose Close does nothing: instances of a fleet share
// one.
type noClose struct{ core.Store }

func (noClose) Close() error { return nil }

// take applies a Take of cost at µs now through st and waits for the
// store's background work, so that traces are deterministic.
func take(t *testing.T, st *lease.Store, plan *engine.Plan, key string, cost, now int64) engine.Result {
	t.Helper()
	res, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: key, Cost: cost, Now: now})
	if err != nil {
		t.Fatalf("Take(%q, %d) at +%dµs: %v", key, cost, now-t0, err)
	}
	lease.Wait(st)
	return res
}

func planOf(limits ...core.Limit) *engine.Plan { return storetest.Plan("", limits...) }
