package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/lease"
)

// Near exhaustion a busy instance's slices shrink with what remains (a
// share of it, then one request at a time), so the last units of a
// window go to whichever instance asks for them, not to the one whose
// demand was highest: the busy instance stops while a few units remain,
// and an instance that never asked before still gets all but its share.
func TestTheLastUnitsGoToWhoeverAsks(t *testing.T) {
	const quota = 1000
	for _, c := range []struct {
		share float64
		stop  int64
	}{{lease.DefaultShare, 60}, {lease.DefaultShare, 13}, {lease.DefaultShare, 200}, {lease.DefaultShare, 500}, {0.1, 60}, {0.1, 200}} {
		share := c.share
		t.Run(fmt.Sprintf("share %.0f%%, %d left", 100*share, c.stop), func(t *testing.T) {
			plan := planOf(core.PerMinute(quota).WithAlgorithm(core.FixedWindow))
			shared := newShared(t)
			busy := newLease(t, shared, lease.WithShare(share))
			idle := newLease(t, shared, lease.WithShare(share))
			now := t0 + ms
			var admitted int64
			// 10 requests a millisecond: without the share's bound a
			// slice would cover 20ms of it, 200 units.
			for quota-admitted > c.stop {
				now += ms / 10
				if take(t, busy, plan, "k", 1, now).Allowed {
					admitted++
				}
			}
			left := quota - admitted
			var got int64
			for take(t, idle, plan, "k", 1, now).Allowed {
				got++
			}
			held := left - got // charged to the busy instance, unspent
			t.Logf("%d left when the busy instance stopped: it held %d, the other got %d", left, held, got)
			// Each slice is at most share of what remained; renewed at
			// half spent, the busy instance may hold the rest of one
			// slice and the whole next: at most about twice its share.
			if float64(held) > 2*share*float64(left)+1 {
				t.Errorf("the busy instance held %d of the last %d units, want at most twice its share (%.0f%%) of them", held, left, 100*share)
			}
			if s := busy.Stats(); s.Local < admitted/2 {
				t.Errorf("busy instance stats %+v: most of its %d admissions should be local", s, admitted)
			}
		})
	}
}

// A lot whose lease ends by MaxLease before its fixed window does gives
// its unspent units back to that window: they are not stranded for the
// rest of a long window.
func TestALeaseEndedBeforeItsWindowGivesItsUnitsBack(t *testing.T) {
	plan := planOf(core.PerMinute(1000).WithAlgorithm(core.FixedWindow))
	shared := newShared(t)
	st := newLease(t, shared, lease.WithMaxLease(time.Second))
	now := t0 + ms
	var admitted int64
	for range 40 {
		now += ms / 2
		if take(t, st, plan, "k", 1, now).Allowed {
			admitted++
		}
	}
	if st.Stats().Local == 0 {
		t.Fatal("nothing was decided in process: no lot to end")
	}
	now += 2 * time.Second.Microseconds() // the leases end; the window (a minute) goes on
	lease.Tick(st, now)
	s := st.Stats()
	res, err := shared.Apply(context.Background(), engine.Op{Plan: plan, Key: "k", Kind: engine.Peek, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if s.Expired != 0 || s.Returned == 0 || res.Remaining != 1000-admitted {
		t.Errorf("after the leases ended: stats %+v, the shared store shows %d remaining; want every unspent unit returned, %d remaining", s, res.Remaining, 1000-admitted)
	}
}
