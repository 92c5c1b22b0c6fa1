package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
)

// A replyDelay is a TCP proxy to a Redis server that holds the server's
// replies back for a delay that can be changed at any time: the commands go
// through at once and run, their replies come late.
type replyDelay struct {
	addr  string
	delay atomic.Int64 // ns
}

// newReplyDelay starts a proxy to target, stopped at the end of t.
func newReplyDelay(t *testing.T, target string) *replyDelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyDelay{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			wg.Add(2)
			go func() { // commands: at once
				defer wg.Done()
				io.Copy(server, client)
				server.Close()
			}()
			go func() { // replies: each chunk held back by the delay when it came
				defer wg.Done()
				defer client.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := server.Read(buf)
					if n > 0 {
						time.Sleep(time.Duration(p.delay.Load()))
						if _, werr := client.Write(buf[:n]); werr != nil {
							io.Copy(io.Discard, server)
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *replyDelay) set(d time.Duration) { p.delay.Store(int64(d)) }

// receiptsIn returns the number of receipts the state of key in scope
// holds: records of ident 0 after the states.
func receiptsIn(t *testing.T, c *redis.Client, s *Store, scope, key string) int {
	t.Helper()
	v, err := c.Get(context.Background(), s.stateKey(scope, key)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	n := 0
	for e := len(v); e >= 32 && binary.LittleEndian.Uint64([]byte(v[e-32:])) == 0; e -= 32 {
		n++
	}
	return n
}

// A caller alone on its lane sends its own command and reads the reply
// under its own deadline. When the reply comes after the deadline (held
// back by a proxy: the script ran at once), the caller is answered by the
// failure policy; the store then finds the operation's receipt (or, with
// operation records, its record) and undoes it, so that the key's state is
// what the answered decisions say.
func TestInlineLostReplyIsUndone(t *testing.T) {
	forEachUndo(t, func(t *testing.T, u undoSetup) {
		direct, proxy, s := u.direct, u.proxy, u.s
		lim := threeTaken(t, s)
		ctx := context.Background()
		if !u.records && receiptsIn(t, direct, s, lim.Scope(), "k") != 1 {
			t.Fatalf("the key holds %d receipts after calls sent inline, want 1 (the last one's)", receiptsIn(t, direct, s, lim.Scope(), "k"))
		}
		proxy.set(3 * core.DefaultTimeout)
		if d, err := lim.Allow(ctx, "k"); err == nil {
			t.Fatalf("Allow with its reply %v late = %+v, want an error (FailClosed)", 3*core.DefaultTimeout, d)
		}
		proxy.set(0)
		awaitUndo(t, s, lateGrace+time.Second, "the Take whose reply was lost was not undone")
		if s.undone.Load() != 1 || s.undoFailed.Load() != 0 {
			t.Fatalf("undone %d, failed to undo %d; want 1 and 0", s.undone.Load(), s.undoFailed.Load())
		}
		time.Sleep(100 * time.Millisecond) // the undo's reply
		d, err := lim.Peek(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if d.Remaining != 997 {
			t.Errorf("Remaining = %d, want 997: three answered Takes, the lost one undone", d.Remaining)
		}
	})
}

// A server stalled (SIGSTOP) from before a Take sent inline until past the
// grace: the caller is answered by the failure policy, and the store cannot
// learn whether to undo the Take (the receipt's lookup times out). It says
// so, in the log and the count of failed undos, without claiming a change:
// the Take, run once the server resumes, finds its deadline passed and
// changes nothing, which the key shows.
func TestAStallPastTheGraceLeavesTheUndoUnknown(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	log := &textLog{}
	s := newStore(t, c, WithLogger(slog.New(log)))
	lim := threeTaken(t, s)
	ctx := context.Background()
	srv.signal(syscall.SIGSTOP)
	if d, err := lim.Allow(ctx, "k"); err == nil {
		srv.signal(syscall.SIGCONT)
		t.Fatalf("Allow on a stalled server = %+v, want an error (FailClosed)", d)
	}
	time.Sleep(lateGrace + core.DefaultTimeout + 300*time.Millisecond)
	srv.signal(syscall.SIGCONT)
	awaitUndo(t, s, 3*time.Second, "the store neither undid the Take nor reported that it could not")
	if s.undone.Load() != 0 || s.undoFailed.Load() != 1 {
		t.Fatalf("undone %d, failed to undo %d; want 0 and 1", s.undone.Load(), s.undoFailed.Load())
	}
	if got := log.lines(); !strings.Contains(got, "could not undo, or learn whether to undo, an operation whose caller gave up") {
		t.Errorf("log:\n%s\nwant the warning that the undo is unknown", got)
	}
	d, err := lim.Peek(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 997 {
		t.Errorf("Remaining = %d, want 997: three answered Takes, the stalled one refused when it ran late", d.Remaining)
	}
}

// An undoSetup is a store whose replies pass through a proxy that can hold
// them back (proxy), its client (c), and a client without the proxy
// (direct); records tells whether the store keeps operation records.
// threeTaken returns a Limiter on s, GCRA at 1000 a day (a unit comes back
// every 86.4 s: none within a test), failing closed with no breaker, whose
// key "k" has had three Takes admitted inline (the first teaches the
// server's clock).
func threeTaken(t *testing.T, s *Store) *core.Limiter {
	t.Helper()
	lim, err := core.New(s, core.PerDay(1000).WithAlgorithm(core.GCRA),
		core.WithFailurePolicy(core.FailClosed), core.WithBreaker(core.Breaker{Disabled: true}))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if d, err := lim.Allow(context.Background(), "k"); err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v, %v; want allowed", d, err)
		}
	}
	return lim
}

// awaitUndo waits, at most within, until s has undone an operation or
// failed to, and fails t with msg if neither happens.
func awaitUndo(t *testing.T, s *Store, within time.Duration, msg string) {
	t.Helper()
	for deadline := time.Now().Add(within); s.undone.Load()+s.undoFailed.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type undoSetup struct {
	direct, c *redis.Client
	proxy     *replyDelay
	s         *Store
	records   bool
}

// forEachUndo runs f once for each way a store learns what a Take whose
// reply was lost did: the reply's receipt, and an operation record.
func forEachUndo(t *testing.T, f func(t *testing.T, u undoSetup)) {
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
			f(t, undoSetup{direct: direct, c: c, proxy: proxy, s: newStore(t, c, tc.opts...), records: tc.opts != nil})
		})
	}
}

// Each lane keeps one receipt in a key; a key holds at most 16 of other
// lanes' live receipts. A seventeenth lane's call is refused by the script
// unrun, and sent again by a worker without a receipt: every call is
// admitted once, and the seventeenth costs one round trip more.
func TestInlineReceiptsAreBounded(t *testing.T) {
	prefix := testPrefix()
	// A unit comes back every 86.4 s: none before the Peek below, however
	// long the 17 stores take to start.
	limit := core.PerDay(1000).WithAlgorithm(core.GCRA)
	ctx := context.Background()
	var lim *core.Limiter
	for i := range 17 {
		c := newClient(t)
		sends := new(scriptSends)
		c.AddHook(sends)
		s := newStore(t, c, WithPrefix(prefix))
		var err error
		if lim, err = core.New(s, limit); err != nil {
			t.Fatal(err)
		}
		if _, err := lim.Allow(ctx, "warm"); err != nil { // teaches the server's clock
			t.Fatal(err)
		}
		sends.n.Store(0)
		if d, err := lim.Allow(ctx, "shared"); err != nil || !d.Allowed {
			t.Fatalf("store %d: Allow = %+v, %v; want allowed", i, d, err)
		}
		if n, want := sends.n.Load(), int64(1+i/16); n != want {
			t.Errorf("store %d: Allow took %d round trips, want %d", i, n, want)
		}
		if n, want := receiptsIn(t, c, s, lim.Scope(), "shared"), min(i+1, 16); n != want {
			t.Errorf("after %d lanes' calls the key holds %d receipts, want %d", i+1, n, want)
		}
	}
	d, err := lim.Peek(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 1000-17 {
		t.Errorf("Remaining = %d, want %d: each of 17 calls admitted once", d.Remaining, 1000-17)
	}
}

// scriptSends is a redis.Hook that counts the round trips that carry a
// script: each EVALSHA or EVAL sent alone, and each pipeline holding one.
type scriptSends struct{ n atomic.Int64 }

func (h *scriptSends) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptSends) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScriptCmd(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *scriptSends) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, isScriptCmd) {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

func isScriptCmd(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

// A receipt keeps its key until it expires, receiptLife after its call's
// deadline, even when the limits are replenished sooner; the key's TTL is
// no longer than that.
func TestInlineReceiptKeepsItsKey(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c, WithMargin(0))
	lim, err := core.New(s, core.Per(1000, 10*time.Millisecond).WithAlgorithm(core.GCRA))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"warm", "k"} {
		if _, err := lim.Allow(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	ttl, err := c.PTTL(ctx, s.stateKey(lim.Scope(), "k")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if most := core.DefaultTimeout + receiptLife; ttl < receiptLife-50*time.Millisecond || ttl > most {
		t.Errorf("PTTL = %v, want about %v (the deadline and the receipt's life), at most %v", ttl, most, most)
	}
	if n := receiptsIn(t, c, s, lim.Scope(), "k"); n != 1 {
		t.Errorf("the key holds %d receipts, want 1", n)
	}
}
