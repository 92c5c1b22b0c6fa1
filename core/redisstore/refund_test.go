package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tollgate/tollgate/core"
)

// A Take whose reply comes after its caller gave up is undone, with a
// refund to the window it charged: a charge made just before a window's
// end, undone just after it, creates no room in the new window (issue 21:
// before receipts, 4 of 4 calls after the boundary passed a quota of 3).
func TestLateTakeUndoneAcrossABoundary(t *testing.T) {
	direct := newClient(t)
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"the receipt tells", nil},
		{"the operation record tells", []Option{WithOpTTL(5 * time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := newReplyDelay(t, direct.Options().Addr)
			c := redis.NewClient(clientOptions(proxy.addr))
			defer c.Close()
			s := newStore(t, c, tc.opts...)
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
			// Take did, and undoes it.
			now := time.Now()
			boundary := now.Truncate(time.Second).Add(time.Second)
			if boundary.Sub(now) < 80*time.Millisecond {
				boundary = boundary.Add(time.Second)
			}
			time.Sleep(time.Until(boundary.Add(-30 * time.Millisecond)))
			proxy.set(150 * time.Millisecond)
			if d, err := lim.Allow(ctx, "k"); err == nil {
				t.Fatalf("Allow with its reply 150 ms late = %+v, want an error (FailClosed)", d)
			}
			time.Sleep(time.Until(boundary.Add(20 * time.Millisecond)))
			admitted := 0
			probe := func() {
				d, err := patient.Allow(ctx, "k")
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
			if s.undone.Load()+s.undoFailed.Load() != 0 {
				t.Skip("the machine was too slow: the undo came before the new window's calls")
			}
			for deadline := time.Now().Add(lateGrace + 2*time.Second); s.undone.Load()+s.undoFailed.Load() == 0; {
				if time.Now().After(deadline) {
					t.Fatal("the Take whose reply was late was not undone")
				}
				time.Sleep(5 * time.Millisecond)
			}
			proxy.set(0)
			if s.undone.Load() != 1 || s.undoFailed.Load() != 0 {
				t.Fatalf("undone %d, failed to undo %d; want 1 and 0", s.undone.Load(), s.undoFailed.Load())
			}
			if time.Now().After(boundary.Add(900 * time.Millisecond)) {
				t.Skip("the machine was too slow to stay in the window after the boundary")
			}
			probe()
			if admitted != 3 {
				t.Errorf("after the boundary %d of 4 admitted, want 3 (the quota): the undo of the earlier window's Take made room in this one", admitted)
			}
		})
	}
}
