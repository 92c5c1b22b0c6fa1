package lease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// held is a shared store whose Takes, once armed, are applied and then
// held back until released: a reservation whose reply is late.
type held struct {
	core.Store
	mu      sync.Mutex
	armed   bool
	arrived chan struct{} // closed when a Take is held back
	release chan struct{}
}

func (h *held) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	res, err := h.Store.Apply(ctx, op)
	h.mu.Lock()
	hold := h.armed && op.Kind == engine.Take
	if hold {
		h.armed = false
		close(h.arrived)
	}
	h.mu.Unlock()
	if hold {
		<-h.release
	}
	return res, err
}

// A Refund passed through while a reservation ahead is in flight waits
// for it: the reservation's reply, which does not count the Refund, must
// not be what later local decisions report. A lone instance's Remaining
// stays exact.
func TestARefundAfterAReservationInFlightCountsInTheRemaining(t *testing.T) {
	const quota = 1000
	plan := planOf(core.PerMinute(quota).WithAlgorithm(core.FixedWindow))
	shared := &held{Store: newShared(t), arrived: make(chan struct{}), release: make(chan struct{})}
	st := newLease(t, shared)
	now := t0 + ms
	admitted := int64(0)
	for range 40 { // a steady demand: the instance holds a slice
		now += ms / 10
		if take(t, st, plan, "k", 1, now).Allowed {
			admitted++
		}
	}
	// Arm the store, then take until a reservation ahead (a renewal, in
	// the background) is applied and its reply held back.
	shared.mu.Lock()
	shared.armed = true
	shared.mu.Unlock()
	for renewing := false; !renewing; {
		now += ms / 10
		res, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Cost: 1, Now: now})
		if err != nil || !res.Allowed {
			t.Fatalf("Take = %+v, %v", res, err)
		}
		admitted++
		select {
		case <-shared.arrived:
			renewing = true
		case <-time.After(time.Millisecond):
		}
	}
	refunded := make(chan error, 1)
	go func() {
		_, err := st.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Refund, Cost: 1, Now: now})
		refunded <- err
	}()
	time.Sleep(20 * time.Millisecond) // the Refund waits, or (before the fix) is applied now
	close(shared.release)
	if err := <-refunded; err != nil {
		t.Fatal(err)
	}
	now += ms / 10
	res := take(t, st, plan, "k", 1, now)
	admitted++
	if want := quota - admitted + 1; !res.Allowed || res.Remaining != want {
		t.Errorf("Take after the Refund: allowed %v, remaining %d; want %d (%d admitted, 1 refunded)", res.Allowed, res.Remaining, want, admitted)
	}
}
