package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
)

// A Take whose reply comes after its caller gave up is undone, with a
// refund to the window it charged: a charge made just before a window's
// end, undone just after it, creates no room in the new window (issue 21:
// before receipts, 4 of 4 calls after the boundary passed a quota of 3).
func TestLateTakeUndoneAcrossABoundary(t *testing.T) {
	forEachUndo(t, func(t *testing.T, u undoSetup) {
		direct, proxy, c, s := u.direct, u.proxy, u.c, u.s
		limit := core.Per(3, time.Second).WithAlgorithm(core.FixedWindow)
		lim, err := core.New(s, limit, core.WithTimeout(20*time.Millisecond), core.WithFailurePolicy(core.FailClosed),
			core.WithBreaker(core.Breaker{Disabled: true}))
		if err != nil {
			t.Fatal(err)
		}
		// The same limit and key, through a client without the
		// proxy: calls that are answered at once.
		other, err := New(direct, WithPrefix(s.prefix))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		patient, err := core.New(other, limit, core.WithFailurePolicy(core.FailClosed))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := c.Ping(ctx).Err(); err != nil { // dials
			t.Fatal(err)
		}
		for ok := 0; ok < 3; { // teaches the store the server's clock
			if _, err := lim.Allow(ctx, "warm"); err == nil {
				ok++
			}
		}
		// 30 ms before a second's end (the server shares this
		// machine's clock), replies are held back 150 ms: the caller
		// gives up after 20 ms. After the boundary, 3 calls take the
		// new window's quota; then the store learns what the lost
		// Take did, and undoes it. A machine too slow to keep that
		// order tries again, on a key of its own, up to 3 times.
		attempt := func(key string) (admitted int, conclusive bool) {
			undone, failed := s.undone.Load(), s.undoFailed.Load()
			now := time.Now()
			boundary := now.Truncate(time.Second).Add(time.Second)
			if boundary.Sub(now) < 80*time.Millisecond {
				boundary = boundary.Add(time.Second)
			}
			time.Sleep(time.Until(boundary.Add(-30 * time.Millisecond)))
			proxy.set(150 * time.Millisecond)
			defer proxy.set(0)
			if d, err := lim.Allow(ctx, key); err == nil {
				t.Fatalf("Allow with its reply 150 ms late = %+v, want an error (FailClosed)", d)
			}
			time.Sleep(time.Until(boundary.Add(20 * time.Millisecond)))
			probe := func() {
				d, err := patient.Allow(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			for range 3 {
				probe()
			}
			if s.undone.Load()+s.undoFailed.Load() != undone+failed {
				return 0, false // the undo came before the new window's calls
			}
			for deadline := time.Now().Add(lateGrace + 2*time.Second); s.undone.Load()+s.undoFailed.Load() == undone+failed; {
				if time.Now().After(deadline) {
					t.Fatal("the Take whose reply was late was not undone")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if s.undone.Load() != undone+1 || s.undoFailed.Load() != failed {
				t.Fatalf("undone %d, failed to undo %d; want 1 and 0", s.undone.Load()-undone, s.undoFailed.Load()-failed)
			}
			if time.Now().After(boundary.Add(900 * time.Millisecond)) {
				return 0, false // past the window after the boundary
			}
			probe()
			return admitted, true
		}
		for i := range 3 {
			admitted, ok := attempt(fmt.Sprintf("k%d", i))
			if !ok {
				t.Logf("attempt %d: the machine was too slow to keep the order; again", i+1)
				continue
			}
			if admitted != 3 {
				t.Errorf("after the boundary %d of 4 admitted, want 3 (the quota): the undo of the earlier window's Take made room in this one", admitted)
			}
			return
		}
		t.Fatal("3 attempts, none in order: the machine was too slow to test the undo across a boundary")
	})
}
