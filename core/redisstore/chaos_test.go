package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
)

// Faults for real, against a redis-server each test starts (server_test.go)
// so that stopping or killing it disturbs no other test: the guarantees
// of DESIGN.md §4 under a stall, a healthy load, a kill and a resume.

// tally counts a load's decisions by source, its errors, and its longest
// call.
type tally struct {
	store, policy, errs atomic.Int64
	storeFailures       atomic.Int64 // errors the hook saw from the store itself, not the open breaker
	timeouts            atomic.Int64 // those of storeFailures that are timeouts
	mu                  sync.Mutex
	longest             time.Duration
}

func (ty *tally) hook(_ context.Context, _ string, err error) {
	if !errors.Is(err, core.ErrUnavailable) {
		ty.storeFailures.Add(1)
		if errors.Is(err, context.DeadlineExceeded) {
			ty.timeouts.Add(1)
		}
	}
}

// call runs one Allow and counts it.
func (ty *tally) call(lim *core.Limiter, key string) {
	start := time.Now()
	d, err := lim.Allow(context.Background(), key)
	took := time.Since(start)
	switch {
	case err != nil:
		ty.errs.Add(1)
	case d.Source == core.FromStore:
		ty.store.Add(1)
	default:
		ty.policy.Add(1)
	}
	ty.mu.Lock()
	ty.longest = max(ty.longest, took)
	ty.mu.Unlock()
}

// load runs callers goroutines, each calling Allow then sleeping pause,
// until the returned function is called; it returns when they are done.
func (ty *tally) load(lim *core.Limiter, callers int, pause time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "caller-" + string(rune('a'+i%26))
			for {
				select {
				case <-done:
					return
				default:
				}
				ty.call(lim, key)
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// longestCall returns the longest call so far.
func (ty *tally) longestCall() time.Duration {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	return ty.longest
}

func (ty *tally) String() string {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	return fmt.Sprintf("store decisions %d, policy decisions %d, errors %d, store failures %d, longest call %v",
		ty.store.Load(), ty.policy.Load(), ty.errs.Load(), ty.storeFailures.Load(), ty.longest)
}

// chaosLimiter is a Limiter on s with default failure options but the
// policy and hook given: the guarantees hold for the defaults.
func chaosLimiter(t *testing.T, s core.Store, policy core.FailurePolicy, ty *tally, opts ...core.Option) *core.Limiter {
	t.Helper()
	lim, err := core.New(s, append([]core.Option{core.Per(1_000_000_000, time.Second).WithAlgorithm(core.GCRA),
		core.WithFailurePolicy(policy), core.WithErrorHook(ty.hook)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// A stall of Redis under light load (4 callers, a call every 2 ms each,
// default options, FailOpen) costs the calls caught in it: at most 20
// decisions made by the failure policy, for a stall of 60 ms (shorter than
// the timeout: none) or of 200 ms (longer, but shorter than the breaker's
// MinOutage, 300 ms: a loaded machine's scheduling delays stay within the
// difference). The breaker stays closed.
func TestStallCostsAFewPolicyDecisions(t *testing.T) {
	for _, stall := range []time.Duration{60 * time.Millisecond, 200 * time.Millisecond} {
		t.Run(stall.String(), func(t *testing.T) {
			srv := startServer(t)
			c := redis.NewClient(clientOptions(srv.addr))
			defer c.Close()
			var ty tally
			lim := chaosLimiter(t, newStore(t, c), core.FailOpen, &ty)
			stop := ty.load(lim, 4, 2*time.Millisecond)
			time.Sleep(300 * time.Millisecond)
			srv.signal(syscall.SIGSTOP)
			time.Sleep(stall)
			srv.signal(syscall.SIGCONT)
			time.Sleep(500 * time.Millisecond)
			stop()
			t.Log(ty.String())
			if p := ty.policy.Load(); p > 20 {
				t.Errorf("a %v stall put %d decisions under the failure policy, want at most 20", stall, p)
			}
			if ty.store.Load() < 100 || ty.errs.Load() != 0 {
				t.Errorf("%v: want the store deciding before and after the stall, and no error under FailOpen", ty.String())
			}
		})
	}
}

// 64 callers on a healthy Redis with default options: no error, no
// decision by the policy, no breaker. On a machine loaded by more than
// this test (CI runners, several test binaries at once on 2 cores), a
// caller descheduled for longer than the timeout still times out: up to
// 0.2% of the calls may, as long as every failure is a timeout and the
// breaker never opens.
func TestHealthyLoadNeverFails(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	defer c.Close()
	var ty tally
	lim := chaosLimiter(t, newStore(t, c), core.FailClosed, &ty)
	stop := ty.load(lim, 64, 0)
	time.Sleep(2 * time.Second)
	stop()
	t.Log(ty.String())
	total := ty.store.Load() + ty.errs.Load()
	if ty.policy.Load() != 0 || ty.storeFailures.Load() != ty.timeouts.Load() || ty.errs.Load() != ty.timeouts.Load() ||
		ty.timeouts.Load()*500 > total {
		t.Errorf("%v: want every decision the store's, but for at most 0.2%% timed out", ty.String())
	}
}

// Redis killed: the breaker opens within a handful of calls, no call
// waits longer than the timeout, and once Redis is back decisions are the
// store's again within one probe interval (the breaker's cool-down).
//
// A refused connection opens the breaker at once, but go-redis retries a
// failed dial (DialerRetries: 5, 100 ms apart) and a failed command
// (MaxRetries: 3) for longer than a caller's timeout by default: a killed
// Redis then looks like one that hangs, and the breaker opens after
// MinOutage (three timeouts). With the client options the package doc
// recommends, the first refused dial reaches the caller.
func TestKilledServerOpensTheBreakerAndRecovers(t *testing.T) {
	const coolDown, callers = 300 * time.Millisecond, 8
	for _, tc := range []struct {
		name        string
		opts        func(*redis.Options)
		maxFailures int64 // calls that reach the killed server
	}{
		{"go-redis defaults: the breaker opens after MinOutage", func(*redis.Options) {}, callers * 6},
		{"recommended options: at the first refused connection", func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 }, 3 * callers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t)
			o := clientOptions(srv.addr)
			tc.opts(o)
			c := redis.NewClient(o)
			defer c.Close()
			var ty tally
			lim := chaosLimiter(t, newStore(t, c), core.FailOpen, &ty, core.WithBreaker(core.Breaker{CoolDown: coolDown}))
			stop := ty.load(lim, callers, time.Millisecond)
			defer stop()
			time.Sleep(200 * time.Millisecond)
			srv.kill()
			time.Sleep(time.Second)
			failures := ty.storeFailures.Load()
			t.Logf("killed: %v", ty.String())
			if failures > tc.maxFailures {
				t.Errorf("%d calls reached a killed server, want the breaker open within %d", failures, tc.maxFailures)
			}
			if ty.policy.Load() < 10*failures {
				t.Errorf("%v: want the breaker answering (almost) every call after the kill", ty.String())
			}
			if l := ty.longestCall(); l > core.DefaultTimeout+slack {
				t.Errorf("a call took %v, want at most the timeout %v (+%v slack)", l, core.DefaultTimeout, slack)
			}
			srv.start()
			up := time.Now()
			before := ty.store.Load()
			for ty.store.Load() == before {
				if time.Since(up) > coolDown+slack+200*time.Millisecond {
					t.Fatalf("%v after Redis came back no decision was the store's", time.Since(up))
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("the store decided again %v after Redis came back (cool-down %v)", time.Since(up), coolDown)
		})
	}
}

// A decision its caller gave up on changes nothing: Redis stopped
// (SIGSTOP) with calls in flight, which time out and are answered by the
// policy; resumed (SIGCONT), it receives them; afterwards the key's state
// is exactly what the answered decisions say.
func TestAbandonedDecisionsChangeNothing(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	twins := &twinSends{}
	c.AddHook(twins)
	const quota = 100_000
	for _, tc := range []struct {
		name  string
		opts  []Option
		clock bool // the Limiter's clock, not Redis TIME
	}{
		{"batched, Redis TIME", nil, false},
		{"unbatched, Redis TIME", []Option{WithBatching(0, 0)}, false},
		{"batched, the caller's clock", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &eventLog{}
			s := newStore(t, c, append(tc.opts, WithObserver(obs))...)
			// 400 days per 100,000: no unit comes back during the test.
			opts := []core.Option{core.Per(quota, core.MaxPeriod).WithAlgorithm(core.GCRA),
				core.WithFailurePolicy(core.FailClosed)}
			if tc.clock {
				// A clock that stands still: Remaining then reports usage
				// alone, with no refill between the calls.
				at := time.Now().Truncate(time.Second)
				opts = append(opts, core.WithClock(core.ClockFunc(func() time.Time { return at })))
			}
			lim, err := core.New(s, opts...)
			if err != nil {
				t.Fatal(err)
			}
			var admitted, failed atomic.Int64
			twins.n.Store(0)
			stallUnder(srv, 16, func() {
				d, err := lim.Allow(context.Background(), "k")
				switch {
				case err != nil:
					failed.Add(1)
				case d.Allowed:
					admitted.Add(1)
				}
			})
			d, err := lim.Peek(context.Background(), "k")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("admitted %d, failed %d; undone %d (%d failed to undo); remaining %d", admitted.Load(), failed.Load(), s.undone.Load(), s.undoFailed.Load(), d.Remaining)
			if failed.Load() == 0 {
				t.Fatal("no call failed during the stall: the test tested nothing")
			}
			if batched := len(tc.opts) == 0; batched != (twins.n.Load() > 0) {
				t.Errorf("%d twins sent (batched: %v): the batched calls go as twins (multi.go), the others never", twins.n.Load(), batched)
			}
			if _, n := obs.count(core.EventCompensation); n != s.undone.Load()+s.undoFailed.Load() {
				t.Errorf("%d compensation events, want one per operation undone or not (%d)", n, s.undone.Load()+s.undoFailed.Load())
			}
			if want := quota - admitted.Load(); d.Remaining != want {
				t.Errorf("after the stall the key has %d remaining, want %d: quota %d less the %d admissions its callers were told of",
					d.Remaining, want, quota, admitted.Load())
			}
		})
	}
}

// stallModes are the ways to Redis the stall tests below take: through the
// batching workers, and each call on its own.
var stallModes = []struct {
	name string
	opts []Option
}{
	{"batched", nil},
	{"unbatched", []Option{WithBatching(0, 0)}},
}

// A LeakyBucket's turns are never given out twice through a stall: Redis
// stopped (SIGSTOP) with Takes in flight, some of which ran and replied too
// late, so that the store undoes them (a refund with their receipt) after
// it resumes, while other callers have queued behind them. The turns the
// admitted callers were told of (the charge's time plus its Delay), during
// the stall and after the undos, stay at least an interval apart.
func TestAStallNeverGivesOutAQueueTurnTwice(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	const perSecond = 10_000 // one turn every 100 µs
	interval := time.Second / perSecond
	for _, tc := range stallModes {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, c, tc.opts...)
			lim, err := core.New(s, core.Per(perSecond, time.Second).WithAlgorithm(core.LeakyBucket).WithBurst(1_000_000),
				core.WithFailurePolicy(core.FailClosed))
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var turns []time.Time
			var failed atomic.Int64
			take := func() {
				d, err := lim.Allow(context.Background(), "k")
				switch {
				case err != nil:
					failed.Add(1)
				case d.Allowed && d.Source == core.FromStore:
					mu.Lock()
					turns = append(turns, d.Receipt().At().Add(d.Delay))
					mu.Unlock()
				}
			}
			stallUnder(srv, 16, take)
			for range 20 { // after the undos: a turn given back twice would go to these
				take()
			}
			t.Logf("%d admitted, %d failed; undone %d (%d failed to undo)", len(turns), failed.Load(), s.undone.Load(), s.undoFailed.Load())
			if failed.Load() == 0 {
				t.Fatal("no call failed during the stall: the test tested nothing")
			}
			slices.SortFunc(turns, time.Time.Compare)
			for i := 1; i < len(turns); i++ {
				if gap := turns[i].Sub(turns[i-1]); gap < interval {
					t.Fatalf("admitted turns %v and %v are %v apart, want at least %v", turns[i-1], turns[i], gap, interval)
				}
			}
		})
	}
}

// Units in flight are never lost to a stall: Redis stopped (SIGSTOP) while
// callers acquire and release, so that acquisitions and releases time
// out; resumed, it receives them. A late acquisition is released by the
// store, and a late Release still runs, so that nothing is held
// afterwards. (The breaker is off: an open breaker sends nothing, and
// units it could not release wait for their lease.)
func TestStalledReleasesHoldNothing(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	const slots = 1000
	for _, tc := range stallModes {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, c, tc.opts...)
			lim, err := core.New(s, core.InFlight(slots, time.Hour), core.PerDay(1_000_000).WithAlgorithm(core.GCRA),
				core.WithFailurePolicy(core.FailClosed), core.WithBreaker(core.Breaker{Disabled: true}))
			if err != nil {
				t.Fatal(err)
			}
			var acquired, releaseFailed, acquireFailed atomic.Int64
			stallUnder(srv, 16, func() {
				d, err := lim.Allow(context.Background(), "k")
				if err != nil || d.Source != core.FromStore {
					acquireFailed.Add(1)
				}
				if err == nil && d.Allowed && d.Lease != 0 {
					acquired.Add(1)
					if _, err := lim.Release(context.Background(), "k", d.Lease); err != nil {
						releaseFailed.Add(1)
					}
				}
			})
			d, err := lim.Peek(context.Background(), "k")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("acquired %d, acquisitions failed %d, releases failed %d; undone %d (%d failed to undo)",
				acquired.Load(), acquireFailed.Load(), releaseFailed.Load(), s.undone.Load(), s.undoFailed.Load())
			if acquireFailed.Load()+releaseFailed.Load() == 0 {
				t.Fatal("no call failed during the stall: the test tested nothing")
			}
			if in := d.States[0]; in.Remaining != slots {
				t.Errorf("after the stall %d units are in flight, want 0: every acquisition ended", slots-in.Remaining)
			}
		})
	}
}

// stallUnder runs call in a loop (a millisecond apart) from callers
// goroutines while srv is stopped (SIGSTOP) for 300 ms and resumed, 200 ms
// into the load; it returns once the load has stopped, 200 ms after the
// resume, and the late replies had time to be read and undone.
func stallUnder(srv *server, callers int, call func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				call()
				time.Sleep(time.Millisecond)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	srv.signal(syscall.SIGSTOP)
	time.Sleep(300 * time.Millisecond)
	srv.signal(syscall.SIGCONT)
	time.Sleep(200 * time.Millisecond)
	close(done)
	wg.Wait()
	time.Sleep(lateGrace + 300*time.Millisecond) // late replies are read, and undone
}
