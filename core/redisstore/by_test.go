package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// A call of ApplyBy whose replies are held back ends at its deadline, or
// at once when its caller's context ends first, on every path a call
// takes: sent by its caller (inline), batched behind it, or from a
// goroutine of its own (unbatched).
func TestApplyByEndsAtItsDeadlineOrItsCaller(t *testing.T) {
	target := env(t, "TOLLGATE_REDIS_ADDR")
	plan := planOf("", core.PerSecond(1000))
	const slack = 150 * time.Millisecond
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"batched", nil}, {"unbatched", []Option{WithBatching(0, 0)}}} {
		t.Run(mode.name, func(t *testing.T) {
			proxy := newReplyDelay(t, target)
			c := redis.NewClient(clientOptions(proxy.addr))
			t.Cleanup(func() { c.Close() })
			s := newStore(t, c, mode.opts...)
			op := engine.Op{Plan: plan, Key: "k", Cost: 1}
			// The store learns the server's clock, and sends inline.
			if _, err := s.ApplyBy(context.Background(), op, time.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			proxy.set(time.Second)
			t.Cleanup(func() { proxy.set(0) }) // first: the store's Close reads what is held back
			check := func(name string, ctx context.Context, by time.Duration, want error, within time.Duration) {
				t.Helper()
				start := time.Now()
				_, err := s.ApplyBy(ctx, op, start.Add(by))
				took := time.Since(start)
				if !errors.Is(err, want) {
					t.Errorf("%s: err = %v, want one wrapping %v", name, err, want)
				}
				if took > within+slack {
					t.Errorf("%s: returned after %v, want about %v", name, took, within)
				}
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the first: inline, its reply held back
				defer wg.Done()
				check("inline, deadline", context.Background(), 80*time.Millisecond, context.DeadlineExceeded, 80*time.Millisecond)
			}()
			time.Sleep(20 * time.Millisecond) // the lane is busy: the next calls queue
			check("queued, deadline", context.Background(), 60*time.Millisecond, context.DeadlineExceeded, 60*time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(40*time.Millisecond, cancel)
			check("queued, caller cancelled", ctx, time.Minute, context.Canceled, 40*time.Millisecond)
			wg.Wait()
		})
	}
}
