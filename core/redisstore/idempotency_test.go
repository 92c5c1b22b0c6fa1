package redisstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// TestSameOperationTwiceChargesOnce runs one command twice, as go-redis
// does when it retries after a timeout: the second run returns the first
// reply and charges nothing.
func TestSameOperationTwiceChargesOnce(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c, WithOpTTL(5*time.Second))
	ctx := context.Background()
	limits := []core.Limit{core.PerMinute(10).WithAlgorithm(core.SlidingLog), core.PerMinute(10).WithAlgorithm(core.GCRA)}
	for _, kind := range []engine.Kind{engine.Take, engine.Charge, engine.Refund, engine.Reset} {
		t.Run(kind.String(), func(t *testing.T) {
			key := "twice-" + kind.String()
			if _, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Kind: engine.Charge, Key: key, Cost: 4}); err != nil {
				t.Fatal(err)
			}
			op := engine.Op{Plan: planOf("", limits...), Kind: kind, Key: key, Cost: 3}
			runTwice(t, c, s, &op)
			d, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Kind: engine.Peek, Key: key})
			if err != nil {
				t.Fatal(err)
			}
			want := map[engine.Kind]int64{engine.Take: 3, engine.Charge: 3, engine.Refund: 9, engine.Reset: 10}[kind]
			if d.Remaining != want {
				t.Errorf("after 4 charged and %s(3) run twice: Remaining = %d, want %d (applied once)", kind, d.Remaining, want)
			}
		})
	}
}

// TestSecondSendRefused is the default, without operation records: the
// same state-changing command written a second time (as go-redis does when
// it retries) fails with ErrResent before reaching the server, so the key is
// charged once; a Peek may be sent any number of times; and a send the
// server refused unrun (NOSCRIPT, after SCRIPT FLUSH) is sent again.
func TestSecondSendRefused(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	limits := []core.Limit{core.PerMinute(10).WithAlgorithm(core.GCRA)}
	for _, kind := range []engine.Kind{engine.Take, engine.Charge, engine.Refund, engine.Reset} {
		key := "once-" + kind.String()
		if _, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Kind: engine.Charge, Key: key, Cost: 4}); err != nil {
			t.Fatal(err)
		}
		op := engine.Op{Plan: planOf("", limits...), Kind: kind, Key: key, Cost: 3}
		sc, keys, args := s.command(&op)
		if _, err := run(ctx, c, sc, keys, args); err != nil {
			t.Fatalf("%s: first send: %v", kind, err)
		}
		if _, err := run(ctx, c, sc, keys, args); !errors.Is(err, ErrResent) {
			t.Errorf("%s: second send = %v, want ErrResent", kind, err)
		}
		d, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Kind: engine.Peek, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[engine.Kind]int64{engine.Take: 3, engine.Charge: 3, engine.Refund: 9, engine.Reset: 10}[kind]; d.Remaining != want {
			t.Errorf("after 4 charged and %s(3) sent twice: Remaining = %d, want %d (applied once)", kind, d.Remaining, want)
		}
	}
	peek := engine.Op{Plan: planOf("", limits...), Kind: engine.Peek, Key: "once-take"}
	sc, keys, args := s.command(&peek)
	for range 2 {
		if _, err := run(ctx, c, sc, keys, args); err != nil {
			t.Fatalf("a Peek sent again: %v", err)
		}
	}
	op := engine.Op{Plan: planOf("", limits...), Kind: engine.Take, Key: "once-noscript", Cost: 1}
	sc, keys, args = s.command(&op)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	reply, err := run(ctx, c, sc, keys, args) // NOSCRIPT, then EVAL: two sends
	if err != nil {
		t.Fatalf("a Take after SCRIPT FLUSH: %v", err)
	}
	if d, err := decode(&op, s.prepare(op.Plan).leased, reply); err != nil || !d.Allowed || d.Remaining != 9 {
		t.Errorf("a Take after SCRIPT FLUSH = %+v, %v; want allowed, 9 left", d, err)
	}
}

// TestSameTakeTwiceRepliesOnce runs one Take that empties the limit twice,
// on every path of the script (the fast path of a specialized script and of
// the generic one, the general path for limits with a log): the second run,
// which alone would be denied, returns the first reply, allowed, and
// charges nothing.
func TestSameTakeTwiceRepliesOnce(t *testing.T) {
	c := newClient(t)
	special := newStore(t, c, WithOpTTL(5*time.Second))
	plain := newStore(t, c, WithOpTTL(5*time.Second))
	plain.maxScripts = 0
	for name, limits := range map[string][]core.Limit{
		"gcra":         {core.PerMinute(10).WithAlgorithm(core.GCRA)},
		"leaky":        {core.PerMinute(10).WithAlgorithm(core.LeakyBucket)},
		"without logs": {core.PerMinute(10).WithAlgorithm(core.GCRA), core.PerMinute(10).WithAlgorithm(core.FixedWindow)},
		"with a log":   {core.PerMinute(10).WithAlgorithm(core.GCRA), core.PerMinute(10).WithAlgorithm(core.SlidingLog)},
	} {
		for _, s := range []*Store{special, plain} {
			name := name + map[bool]string{true: "/generic", false: "/specialized"}[s == plain]
			t.Run(name, func(t *testing.T) {
				testSameTakeTwice(t, c, s, "brim-"+name, limits)
			})
		}
	}
}

// runTwice runs op's command twice, as a resend would, and checks that the
// second run replies as the first did; it returns the first reply.
func runTwice(t *testing.T, c *redis.Client, s *Store, op *engine.Op) any {
	t.Helper()
	ctx := context.Background()
	sc, keys, args := s.command(op)
	first, err := run(ctx, c, sc, keys, args)
	if err != nil {
		t.Fatal(err)
	}
	again, err := run(ctx, c, sc, keys, args)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, again) {
		t.Errorf("second run = %v, want the first's reply %v", again, first)
	}
	return first
}

func testSameTakeTwice(t *testing.T, c *redis.Client, s *Store, key string, limits []core.Limit) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Kind: engine.Charge, Key: key, Cost: 4}); err != nil {
		t.Fatal(err)
	}
	op := engine.Op{Plan: planOf("", limits...), Kind: engine.Take, Key: key, Cost: 6}
	first := runTwice(t, c, s, &op)
	if d, err := decode(&op, s.prepare(op.Plan).leased, first); err != nil || !d.Allowed {
		t.Errorf("first run = %+v, %v, want allowed", d, err)
	}
	d, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Kind: engine.Peek, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 0 {
		t.Errorf("after 4 charged and Take(6) run twice: Remaining = %d, want 0", d.Remaining)
	}
	// A different operation is not mistaken for the first.
	d, err = s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Kind: engine.Take, Key: key, Cost: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed {
		t.Errorf("Take(1) on an empty limit allowed: %+v", d)
	}
}

// TestRetryAfterReadTimeout makes go-redis really retry: the shared server
// is paused (SIGSTOP) longer than the client's ReadTimeout, so the command
// times out and is sent again on new connections while the first copies
// wait in the server's socket buffers; on SIGCONT the server runs every
// copy. With operation records the copies run and the key is charged once.
// Without (the default) go-redis is refused the second send: Apply fails
// (with ErrResent, or with the timeout of the first send, which go-redis
// keeps on a pipelined command), and the first copy alone charges the key,
// once.
func TestRetryAfterReadTimeout(t *testing.T) {
	addr := env(t, "TOLLGATE_REDIS_ADDR")
	proc := sharedPID(t)
	limits := []core.Limit{core.Per(100, core.MaxPeriod).WithAlgorithm(core.FixedWindow)}
	for _, tc := range []struct {
		records, batched bool
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		records := tc.records
		name, opts := "with operation records", []Option{WithOpTTL(5 * time.Second), WithBatching(0, 0)}
		if !records {
			name, opts = "without operation records", []Option{WithBatching(0, 0)}
		}
		if tc.batched {
			name, opts = name+", batched", append(opts, WithBatching(8, 1))
		}
		t.Run(name, func(t *testing.T) {
			// No ContextTimeoutEnabled and no deadline: the retries of
			// go-redis itself, after its ReadTimeout.
			c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 100 * time.Millisecond, MaxRetries: 20,
				MinRetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond})
			defer c.Close()
			s := newStore(t, c, opts...)
			ctx := context.Background()
			// Warm connections: a retry on a new connection would fail in its
			// handshake with the paused server, which go-redis does not retry.
			var warm sync.WaitGroup
			for range 8 {
				warm.Add(1)
				go func() {
					defer warm.Done()
					c.Do(ctx, "DEBUG", "SLEEP", "0.05")
				}()
			}
			warm.Wait()
			resume := pause(t, proc)
			done := make(chan error, 1)
			go func() {
				_, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Key: "retried", Cost: 1})
				done <- err
			}()
			time.Sleep(300 * time.Millisecond) // two or three attempts time out
			resume()
			err := <-done
			switch {
			case records && err != nil:
				t.Fatalf("Apply across the pause: %v", err)
			case !records && !errors.Is(err, ErrResent) && !isTimeout(err):
				t.Fatalf("Apply across the pause = %v, want ErrResent or the first send's timeout", err)
			}
			time.Sleep(50 * time.Millisecond) // the earlier copies run too
			d, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Kind: engine.Peek, Key: "retried"})
			if err != nil {
				t.Fatal(err)
			}
			charged := 100 - d.Remaining
			if charged != 1 {
				t.Errorf("one AllowN(1) retried by go-redis charged %d, want 1", charged)
			}
		})
	}
}

// TestRecordLivesUntilTheDeadline checks how long an operation's record
// lives: go-redis sends no copy of a command after its context's deadline,
// which is the caller's and lateGrace more (the store reads late replies),
// so under a deadline the record lives until then and recordSlack more, not
// the whole WithOpTTL (records are what a state-changing decision costs the
// server most); without a deadline, WithOpTTL.
func TestRecordLivesUntilTheDeadline(t *testing.T) {
	c := newClient(t)
	limits := []core.Limit{core.PerMinute(10).WithAlgorithm(core.GCRA)}
	const opTTL = time.Minute
	slack := recordSlack * time.Millisecond
	for _, batched := range []bool{false, true} {
		opts := []Option{WithBatching(0, 0)}
		if batched {
			opts = []Option{WithBatching(8, 1)}
		}
		s := newStore(t, c, append(opts, WithOpTTL(opTTL))...)
		for _, tc := range []struct {
			timeout time.Duration // 0: no deadline
			lo, hi  time.Duration // the record's PTTL right after the call
		}{
			{time.Second, 900*time.Millisecond + lateGrace, time.Second + lateGrace + slack},
			{0, opTTL - 10*time.Second, opTTL},
		} {
			name := fmt.Sprintf("batched=%v/timeout=%v", batched, tc.timeout)
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
			}
			key := "record-ttl-" + strconv.Itoa(int(tc.timeout/time.Millisecond))
			_, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Key: key, Cost: 1})
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			recs := scan(t, c, s.stateKey("", key)+":op:")
			if len(recs) != 1 {
				t.Fatalf("%s: records %q, want 1", name, recs)
			}
			ttl, err := c.PTTL(context.Background(), recs[0]).Result()
			if err != nil {
				t.Fatal(err)
			}
			if ttl < tc.lo || ttl > tc.hi {
				t.Errorf("%s: the record's PTTL is %v, want within [%v, %v]", name, ttl, tc.lo, tc.hi)
			}
		}
	}
}

// isTimeout reports whether err is an I/O timeout.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
