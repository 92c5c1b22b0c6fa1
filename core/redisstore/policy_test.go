package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// The failure policy against a real Redis that fails: a closed port, a
// paused server (SIGSTOP), a server killed mid-load and started again.
// Each case: no call waits longer than the timeout plus slack, the policy
// applies, the hook receives the errors, and decisions return to normal.

const (
	policyTimeout  = 50 * time.Millisecond
	policyCoolDown = 200 * time.Millisecond
	// slack is what a loaded 2-core machine under -race may add to a call
	// that gives up at the timeout.
	slack = 150 * time.Millisecond
)

// probe counts a limiter's calls, their longest duration and the errors
// its hook received.
type probe struct {
	hooked  atomic.Int64
	unavail atomic.Int64 // hooked errors wrapping core.ErrUnavailable (breaker open)
	mu      sync.Mutex
	longest time.Duration
}

func (p *probe) hook(_ context.Context, _ string, err error) {
	p.hooked.Add(1)
	if errors.Is(err, core.ErrUnavailable) {
		p.unavail.Add(1)
	}
}

// call runs fn and records its duration.
func (p *probe) call(fn func()) {
	start := time.Now()
	fn()
	d := time.Since(start)
	p.mu.Lock()
	p.longest = max(p.longest, d)
	p.mu.Unlock()
}

func (p *probe) checkLongest(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("longest call %v, hook called %d times (%d while the breaker was open)", p.longest, p.hooked.Load(), p.unavail.Load())
	if p.longest > policyTimeout+slack {
		t.Errorf("a call took %v, want at most the timeout %v (+%v slack)", p.longest, policyTimeout, slack)
	}
}

func newPolicyLimiter(t *testing.T, s core.Store, p *probe, policy core.FailurePolicy) *core.Limiter {
	t.Helper()
	lim, err := core.New(s, core.PerSecond(1000).WithAlgorithm(core.GCRA),
		core.WithTimeout(policyTimeout), core.WithBreaker(core.Breaker{CoolDown: policyCoolDown}),
		core.WithFailurePolicy(policy), core.WithErrorHook(p.hook))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// storeModes runs fn with an unbatched and a batched store of c.
func storeModes(t *testing.T, c Client, fn func(t *testing.T, s *Store)) {
	t.Run("unbatched", func(t *testing.T) { fn(t, newStore(t, c, WithBatching(0, 0))) })
	t.Run("batched", func(t *testing.T) { fn(t, newStore(t, c, WithBatching(32, 2))) })
}

func TestPolicyClosedPort(t *testing.T) {
	c := redis.NewClient(clientOptions(freeAddr(t)))
	defer c.Close()
	storeModes(t, c, func(t *testing.T, s *Store) {
		var p probe
		lim := newPolicyLimiter(t, s, &p, core.FailOpen)
		for i := range 20 {
			p.call(func() {
				d, err := lim.Allow(context.Background(), "k")
				if err != nil || !d.Allowed {
					t.Errorf("Allow #%d on a closed port with FailOpen = %+v, %v; want allowed, no error", i, d, err)
				}
			})
		}
		p.checkLongest(t)
		if p.hooked.Load() != 20 {
			t.Errorf("hook called %d times for 20 failed calls", p.hooked.Load())
		}
		if p.unavail.Load() < 15 {
			t.Errorf("%d of 20 calls skipped by the breaker, want all but the first few", p.unavail.Load())
		}
	})
}

func TestPolicyPausedServer(t *testing.T) {
	c := newClient(t)
	proc := sharedPID(t)
	storeModes(t, c, func(t *testing.T, s *Store) {
		var p probe
		lim := newPolicyLimiter(t, s, &p, core.FailClosed)
		ctx := context.Background()
		if _, err := lim.Allow(ctx, "k"); err != nil {
			t.Fatalf("Allow before the pause: %v", err)
		}
		resume := pause(t, proc)
		var wg sync.WaitGroup
		var denied atomic.Int64
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					p.call(func() {
						_, err := lim.Allow(ctx, "k")
						if !errors.Is(err, core.ErrUnavailable) {
							t.Errorf("Allow on a paused server with FailClosed: err = %v, want one wrapping ErrUnavailable", err)
						}
						denied.Add(1)
					})
					time.Sleep(5 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		resume()
		p.checkLongest(t)
		if p.hooked.Load() != denied.Load() {
			t.Errorf("hook called %d times for %d failed calls", p.hooked.Load(), denied.Load())
		}
		waitRecovery(t, lim)
	})
}

// waitRecovery waits out the cool-down and requires the limiter to decide
// on the store again.
func waitRecovery(t *testing.T, lim *core.Limiter) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		time.Sleep(policyCoolDown)
		d, err := lim.Allow(context.Background(), "recovered")
		if err == nil && d.Allowed && d.Limit.Quota == 1000 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after the store came back, Allow = %+v, %v", d, err)
		}
	}
}

func TestPolicyServerRestart(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	storeModes(t, c, func(t *testing.T, s *Store) {
		var p probe
		fallback := memstore.New()
		defer fallback.Close()
		lim := newPolicyLimiter(t, s, &p, core.Fallback(fallback))
		ctx := context.Background()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					p.call(func() {
						d, err := lim.Allow(ctx, string(rune('a'+w)))
						if err != nil || !d.Allowed {
							t.Errorf("Allow with a Fallback store = %+v, %v; want allowed, no error", d, err)
						}
					})
					time.Sleep(time.Millisecond)
				}
			}()
		}
		time.Sleep(150 * time.Millisecond)
		srv.kill()
		time.Sleep(400 * time.Millisecond)
		srv.start()
		time.Sleep(2 * policyCoolDown)
		close(stop)
		wg.Wait()
		p.checkLongest(t)
		if p.hooked.Load() == 0 {
			t.Error("the hook saw no error while the server was down")
		}
		waitRecovery(t, lim)
		if len(scan(t, c, s.prefix)) == 0 {
			t.Error("after recovery the decisions did not reach Redis")
		}
	})
}
