package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease"
)

type clockAt struct{ t time.Time }

func (c *clockAt) Now() time.Time { return c.t }

// A request admitted from a lease has a receipt: its refund (a failed
// request, WithRefundOn) gives the unit back to the shared state, to the
// window the lease's units were charged in, and to no later one.
func TestARefundOfALeasedAdmissionGoesToTheSharedWindow(t *testing.T) {
	ctx := context.Background()
	shared := newShared(t)
	st := newLease(t, shared)
	clock := &clockAt{time.Unix(1_800_000_000, 0).Add(100 * time.Millisecond)}
	limit := core.PerSecond(100_000).WithAlgorithm(core.FixedWindow)
	lim, err := core.New(st, limit, core.WithClock(clock), core.WithName("leased"))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := core.New(noClose{shared}, limit, core.WithClock(clock), core.WithName("leased"))
	if err != nil {
		t.Fatal(err)
	}
	var d core.Decision
	for range 400 { // demand learned, slices reserved, then decided locally
		clock.t = clock.t.Add(100 * time.Microsecond)
		if d, err = lim.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v, %v", d, err)
		}
		if !d.Receipt().Charged() {
			t.Fatalf("a leased admission has no receipt (%+v): its refund would be lost", d)
		}
		lease.Wait(st)
	}
	if st.Stats().Local == 0 {
		t.Fatal("no decision was local: the test tests nothing")
	}
	if !d.Receipt().Charged() {
		t.Fatalf("a leased admission has no receipt (%+v): its refund would be lost", d)
	}
	before, _ := direct.Peek(ctx, "k")
	if _, err := lim.RefundTo(ctx, "k", d.Receipt(), 1); err != nil {
		t.Fatal(err)
	}
	after, _ := direct.Peek(ctx, "k")
	if after.Remaining != before.Remaining+1 {
		t.Errorf("the shared state's Remaining went from %d to %d after the refund, want one more", before.Remaining, after.Remaining)
	}
	// In the next window, the refund of a unit of the last one gives
	// nothing.
	clock.t = clock.t.Add(time.Second)
	if _, err := direct.AllowN(ctx, "k", 100_000); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.RefundTo(ctx, "k", d.Receipt(), 1); err != nil {
		t.Fatal(err)
	}
	if p, _ := direct.Peek(ctx, "k"); p.Remaining != 0 {
		t.Errorf("a refund of the last window's unit left %d in the new window, want 0", p.Remaining)
	}
}
