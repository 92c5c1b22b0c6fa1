package ratelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func TestCause(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Source: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 51234},
		Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379}, Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"a refused dial keeps the system call and the address", fmt.Errorf("redisstore: take %q: %w", "key", refused),
			"dial tcp 127.0.0.1:6379: connect: connection refused"},
		{"a reset drops the local address, which changes per connection", fmt.Errorf("redisstore: take %q: %w", "key", reset),
			"read tcp 127.0.0.1:6379: read: connection reset by peer"},
		{"a wrapped timeout is the timeout", fmt.Errorf("store: take %q: %w", "key", context.DeadlineExceeded),
			"context deadline exceeded"},
		{"two wrapped errors give the last", fmt.Errorf("%w: %w", errors.New("kind"), errors.New("detail")), "detail"},
		{"an error that wraps nothing is itself", errors.New("ERR unknown command"), "ERR unknown command"},
		{"nil is empty", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Cause(c.err); got != c.want {
				t.Errorf("Cause(%v) = %q, want %q", c.err, got, c.want)
			}
		})
	}
}

type counter struct{ n atomic.Int64 }

func (c *counter) Enabled(context.Context, slog.Level) bool  { return true }
func (c *counter) Handle(context.Context, slog.Record) error { c.n.Add(1); return nil }
func (c *counter) WithAttrs([]slog.Attr) slog.Handler        { return c }
func (c *counter) WithGroup(string) slog.Handler             { return c }

// Past maxCauses, new causes share one budget: a flood of distinct causes
// is bounded too.
func TestCausesAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &counter{}
		l := New(slog.New(out))
		for i := range 10 * maxCauses {
			l.Log(context.Background(), fmt.Sprint(i), 1, slog.LevelWarn, "failed")
		}
		if got := out.n.Load(); got != maxCauses+1 {
			t.Errorf("%d distinct causes wrote %d lines at once, want %d (one per kept cause, one shared)", 10*maxCauses, got, maxCauses+1)
		}
		time.Sleep(Interval)
		synctest.Wait()
		if got := out.n.Load(); got != maxCauses+2 {
			t.Errorf("an interval later: %d lines, want %d (the shared cause's count)", got, maxCauses+2)
		}
	})
}

// Flush writes the pending counts at once, oldest cause first, and leaves
// nothing for the end of their intervals.
func TestFlushWritesPendingCountsNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf strings.Builder
		l := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}})))
		ctx := context.Background()
		for _, cause := range []string{"a", "b"} {
			for range 3 {
				l.Log(ctx, cause, 1, slog.LevelWarn, "failed "+cause)
			}
			time.Sleep(time.Millisecond)
		}
		l.Flush()
		l.Log(ctx, "end", 1, slog.LevelInfo, "the end")
		time.Sleep(2 * Interval)
		synctest.Wait()
		want := "level=WARN msg=\"failed a\"\nlevel=WARN msg=\"failed b\"\n" +
			"level=WARN msg=\"failed a\" repeated=2\nlevel=WARN msg=\"failed b\" repeated=2\nlevel=INFO msg=\"the end\"\n"
		if buf.String() != want {
			t.Errorf("logged\n%s\nwant\n%s", buf.String(), want)
		}
	})
}

// blockingHandler records the messages it writes, and holds the first line
// with a "repeated" count until release is closed, having closed entered.
type blockingHandler struct {
	slog.Handler
	entered, release chan struct{}
	held             atomic.Bool
	lines            chan string
}

func (h *blockingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *blockingHandler) Handle(ctx context.Context, r slog.Record) error {
	repeated := false
	r.Attrs(func(a slog.Attr) bool { repeated = repeated || a.Key == "repeated"; return true })
	if repeated && h.held.CompareAndSwap(false, true) {
		close(h.entered)
		<-h.release
	}
	h.lines <- r.Message
	return nil
}

// A Flush returns only after the line of a flush under way (an Interval's
// timer that took a count just before) is written: the caller's next line,
// a circuit breaker closing, must come after every count of the outage.
func TestFlushWaitsForAFlushUnderWay(t *testing.T) {
	h := &blockingHandler{Handler: slog.DiscardHandler, entered: make(chan struct{}), release: make(chan struct{}), lines: make(chan string, 10)}
	l := New(slog.New(h))
	ctx := context.Background()
	l.Log(ctx, "k", 1, slog.LevelWarn, "failed") // written at once
	l.Log(ctx, "k", 1, slog.LevelWarn, "failed") // counted
	<-h.lines
	l.mu.Lock()
	c := l.causes["k"]
	l.mu.Unlock()
	go l.flush(c) // as the Interval's timer would
	<-h.entered
	done := make(chan struct{})
	go func() {
		l.Flush()
		h.lines <- "after Flush"
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("Flush returned while a flush was writing its count")
	case <-time.After(50 * time.Millisecond):
	}
	close(h.release)
	<-done
	if first, second := <-h.lines, <-h.lines; first != "failed" || second != "after Flush" {
		t.Fatalf("lines %q, %q: want the count's line, then Flush's return", first, second)
	}
}

// flushingHandler calls Flush on its Logger while it writes a count: a
// handler that reaches a Limiter whose breaker logs to the same Logger.
type flushingHandler struct {
	slog.Handler
	l     *Logger
	lines chan string
}

func (h *flushingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "failed" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "repeated" {
				h.l.Flush()
			}
			return true
		})
	}
	h.lines <- r.Message
	return nil
}

// A handler that reaches Flush while it writes a count does not wait for
// itself for good: Flush gives up waiting after flushWait.
func TestFlushFromAHandlerWritingACountReturns(t *testing.T) {
	h := &flushingHandler{Handler: slog.DiscardHandler, lines: make(chan string, 10)}
	l := New(slog.New(h))
	h.l = l
	ctx := context.Background()
	l.Log(ctx, "k", 1, slog.LevelWarn, "failed")
	l.Log(ctx, "k", 1, slog.LevelWarn, "failed")
	l.mu.Lock()
	c := l.causes["k"]
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		l.flush(c)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a flush whose handler calls Flush did not return in 10s")
	}
	if n := len(h.lines); n != 2 {
		t.Fatalf("%d lines written, want 2 (the first, then the count)", n)
	}
}
