package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// ApplyBy gives up at its deadline on a stalled server (SIGSTOP), on each
// path a call takes: sent by a lone caller itself (inline), batched behind
// another call in flight, and on a store without batching; and at its
// context's deadline when that comes first. A core.Limiter gives the store
// its timeout this way, with no context of its own: this is what bounds a
// caller's wait. The calls' receipts (the lane of ARGV[1], set only on a
// call sent inline) show which path each took.
func TestApplyByGivesUpAtItsDeadline(t *testing.T) {
	const by = 150 * time.Millisecond
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	lanes := &receiptLanes{byKey: map[string]string{}}
	c.AddHook(lanes)
	plan := planOf("", core.PerSecond(10))
	take := func(key string) engine.Op { return engine.Op{Plan: plan, Key: key, Kind: engine.Take, Cost: 1} }
	for _, tc := range []struct {
		name string
		opts []Option
	}{{"batched", nil}, {"unbatched", []Option{WithBatching(0, 0)}}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, c, tc.opts...)
			// A first call teaches the store the server's clock, which a
			// call sent inline needs.
			if _, err := s.Apply(context.Background(), take("warm")); err != nil {
				t.Fatal(err)
			}
			srv.signal(syscall.SIGSTOP)
			defer srv.signal(syscall.SIGCONT)
			type outcome struct {
				took time.Duration
				err  error
			}
			calls := []struct {
				name string
				ctx  func() (context.Context, context.CancelFunc)
				by   time.Duration
			}{
				{"lone caller", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, by},
				{"a second caller", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, by},
				{"its context's deadline first", func() (context.Context, context.CancelFunc) {
					return context.WithTimeout(context.Background(), by)
				}, time.Hour},
			}
			out := make([]outcome, len(calls))
			var wg sync.WaitGroup
			for i, cl := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := cl.ctx()
					defer cancel()
					start := time.Now()
					_, err := s.ApplyBy(ctx, take(cl.name), start.Add(cl.by))
					out[i] = outcome{time.Since(start), err}
				}()
				time.Sleep(20 * time.Millisecond) // in flight in this order
			}
			wg.Wait()
			for i, cl := range calls {
				// Sent inline, with its lane, or by a worker, with 0.
				if lane, inline := lanes.of(s.stateKey("", cl.name)), i == 0; lane == "" || (lane != "0") != inline {
					t.Errorf("%s: sent with lane %q, want it sent inline: %v", cl.name, lane, inline)
				}
				o := out[i]
				if !errors.Is(o.err, context.DeadlineExceeded) {
					t.Errorf("%s: err = %v, want the deadline's", cl.name, o.err)
				}
				if o.took < by-5*time.Millisecond || o.took > by+slack {
					t.Errorf("%s: gave up after %v, want %v (+%v slack)", cl.name, o.took, by, slack)
				}
			}
		})
	}
}

// receiptLanes is a redis.Hook that records, by its state key, the lane
// each script command was sent with (opArgs.lane: 0 unless sent
// inline).
type receiptLanes struct {
	mu    sync.Mutex
	byKey map[string]string
}

func (h *receiptLanes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *receiptLanes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *receiptLanes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		for _, cmd := range cmds {
			if args := cmd.Args(); isScriptCmd(cmd) && len(args) > 4 {
				for _, arg := range args[4:] {
					if a, ok := arg.(*opArgs); ok {
						h.byKey[fmt.Sprint(args[3])] = fmt.Sprint(a.lane)
					}
				}
			}
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// of returns the lane of the command on the state key k, or "".
func (h *receiptLanes) of(k string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byKey[k]
}

// A caller whose call waits in a worker's pipeline on a stalled server
// (SIGSTOP) still gives up at its deadline when the store is closed
// meanwhile: closing cancels the pipeline, which a read blocked on the
// socket does not see, so only the batcher's watch (watch.go) can answer
// the caller in time; it must outlive the close.
func TestClosingStoreKeepsCallersDeadlines(t *testing.T) {
	const by = 300 * time.Millisecond
	s, lanes, take := stalledStore(t)
	took := make([]time.Duration, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, key := range []string{"first", "batched"} { // the first is sent inline, the second by a worker
		wg.Go(func() {
			start := time.Now()
			_, errs[i] = s.ApplyBy(context.Background(), take(key), start.Add(by))
			took[i] = time.Since(start)
		})
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the second is in a worker's pipeline
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, key := range []string{"first", "batched"} {
		// Sent inline, with its lane, or by a worker, with 0.
		if lane, inline := lanes.of(s.stateKey("", key)), i == 0; lane == "" || (lane != "0") != inline {
			t.Errorf("%s: sent with lane %q, want it sent inline: %v", key, lane, inline)
		}
		if !errors.Is(errs[i], context.DeadlineExceeded) || took[i] > by+slack {
			t.Errorf("%s caller: %v after %v, want the deadline's error by %v (+%v slack)", key, errs[i], took[i], by, slack)
		}
	}
}

// Callers that wait to join a full queue, on a stalled server (SIGSTOP),
// are given up at their deadlines by the batcher's watch, and leave it:
// once they have returned it holds none of their calls.
func TestCallersOfAFullQueueGiveUpAtTheirDeadlines(t *testing.T) {
	const by = 200 * time.Millisecond
	// One worker, one call a batch, one call queued: of six callers, the
	// fourth on wait to join the queue.
	s, _, take := stalledStore(t, WithBatching(1, 1))
	const n = 6
	took := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			_, errs[i] = s.ApplyBy(context.Background(), take(fmt.Sprint("k", i)), start.Add(by))
			took[i] = time.Since(start)
		})
		time.Sleep(5 * time.Millisecond) // in this order
	}
	wg.Wait()
	for i := range n {
		if !errors.Is(errs[i], context.DeadlineExceeded) || took[i] > by+slack {
			t.Errorf("caller %d: %v after %v, want the deadline's error by %v (+%v slack)", i, errs[i], took[i], by, slack)
		}
	}
	w := s.lanes.one.batch.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, held := range w.calls {
		if held != nil {
			t.Errorf("the watch still holds a call in slot %d after its caller returned", i)
		}
	}
}

// stalledStore returns a store of opts over a server of its own, once it
// has learned the server's clock (which a call sent inline needs), with
// the server stopped (SIGSTOP) until the test ends; lanes, a hook of its
// client, records the lane each command was sent with, and take makes a
// Take of cost 1 on a key.
func stalledStore(t *testing.T, opts ...Option) (s *Store, lanes *receiptLanes, take func(key string) engine.Op) {
	t.Helper()
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	t.Cleanup(func() { c.Close() })
	lanes = &receiptLanes{byKey: map[string]string{}}
	c.AddHook(lanes)
	s = newStore(t, c, opts...)
	plan := planOf("", core.PerSecond(10))
	take = func(key string) engine.Op { return engine.Op{Plan: plan, Key: key, Kind: engine.Take, Cost: 1} }
	if _, err := s.Apply(context.Background(), take("warm")); err != nil {
		t.Fatal(err)
	}
	srv.signal(syscall.SIGSTOP)
	t.Cleanup(func() { srv.signal(syscall.SIGCONT) })
	return s, lanes, take
}

// TestAnIdleStoreKeepsItsDeadlines: a store that has not heard from the
// server for a while lowers its estimate of the server's clock by
// driftAllowance per second of that pause (serverClock), which after 100 s
// is a Limiter's whole 100 ms timeout: the first calls after such a pause
// were stamped with a deadline the server had already passed, and refused.
// A batch whose deadlines the allowance would cut by more than a quarter
// asks the server's TIME first: after a pause of 200 s (its last reply's
// time moved back), a Take sent inline, one sent alone from a goroutine
// (no batching) and two batched are each decided and allowed, and the
// clock has learned a fresh offset.
func TestAnIdleStoreKeepsItsDeadlines(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	plan := planOf("", core.PerSecond(1000))
	for _, tc := range []struct {
		name  string
		opts  []Option
		calls int
	}{
		{"inline", nil, 1},
		{"alone, no batching", []Option{WithBatching(0, 0)}, 1},
		{"batched", []Option{WithBatching(64, 1)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, c, tc.opts...)
			key := "idle " + tc.name
			if _, err := s.ApplyBy(ctx, engine.Op{Plan: plan, Key: key, Cost: 1}, time.Now().Add(100*time.Millisecond)); err != nil {
				t.Fatal(err) // teaches the store the server's clock
			}
			k := s.clock
			k.mu.Lock()
			k.seen.Add(-200e6) // the last reply, 200 s ago
			k.sec -= 200
			k.mu.Unlock()
			if d := k.deadline(time.Now().Add(100*time.Millisecond), time.Now()); d > time.Now().UnixMicro()-50_000 {
				t.Fatalf("after 200 s the stale offset still puts a deadline 100 ms away at %d, not 100 ms before the server's time %d", d, time.Now().UnixMicro())
			}
			var wg sync.WaitGroup
			errs := make([]error, tc.calls)
			for i := range tc.calls {
				wg.Go(func() {
					var res engine.Result
					res, errs[i] = s.ApplyBy(ctx, engine.Op{Plan: plan, Key: key, Cost: 1}, time.Now().Add(100*time.Millisecond))
					if errs[i] == nil && !res.Allowed {
						errs[i] = fmt.Errorf("denied: %+v", res)
					}
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("call %d after the pause: %v", i, err)
				}
			}
			k.mu.Lock()
			age := k.since(time.Now()) - k.seen.Load()
			k.mu.Unlock()
			if age > 10e6 {
				t.Errorf("the clock's last reply is %d µs old after the calls, want a fresh one", age)
			}
		})
	}
}

// TestAnIdleStoreGivesUpOnAStalledServer is the same pause on a stopped
// server (SIGSTOP): the TIME the store asks first waits no longer than
// the caller, who gives up at its deadline, inline and without batching;
// and once the server resumes, the key shows no charge of that call (one
// unit used of 10 an hour, by the call before the pause).
func TestAnIdleStoreGivesUpOnAStalledServer(t *testing.T) {
	const by = 150 * time.Millisecond
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	ctx := context.Background()
	plan := planOf("", core.PerHour(10).WithAlgorithm(core.GCRA))
	for _, tc := range []struct {
		name string
		opts []Option
	}{{"inline", nil}, {"unbatched", []Option{WithBatching(0, 0)}}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, c, tc.opts...)
			key := "stalled after a pause, " + tc.name
			if _, err := s.Apply(ctx, engine.Op{Plan: plan, Key: key, Cost: 1}); err != nil {
				t.Fatal(err) // one unit; teaches the store the server's clock
			}
			k := s.clock
			k.mu.Lock()
			k.seen.Add(-200e6) // the last reply, 200 s ago
			k.sec -= 200
			k.mu.Unlock()
			srv.signal(syscall.SIGSTOP)
			start := time.Now()
			_, err := s.ApplyBy(ctx, engine.Op{Plan: plan, Key: key, Cost: 1}, start.Add(by))
			took := time.Since(start)
			srv.signal(syscall.SIGCONT)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want the deadline's", err)
			}
			if took < by-5*time.Millisecond || took > by+slack {
				t.Errorf("gave up after %v, want %v (+%v slack)", took, by, slack)
			}
			time.Sleep(lateGrace + 500*time.Millisecond) // the resumed server runs what it holds; an undo would be done
			res, err := s.Apply(ctx, engine.Op{Plan: plan, Key: key, Kind: engine.Peek})
			if err != nil {
				t.Fatal(err)
			}
			if res.Remaining != 9 {
				t.Errorf("after the server resumed, %d of 10 remain, want 9: the call that gave up was charged", res.Remaining)
			}
		})
	}
}
