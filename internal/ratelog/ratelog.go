// Package ratelog writes log lines through log/slog at most about once per
// Interval per cause: the first occurrence of a burst at once, then, while
// the burst lasts, one line per Interval that counts the occurrences since
// the last line. A burst of a million failures is a line and a count, and
// a failure after a quiet Interval is a line of its own.
//
// It is shared by core, memstore and redisstore (internal to the
// repository, so not part of any module's API).
package ratelog

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"
)

// Interval is the shortest time between two lines of one cause.
const Interval = time.Second

// maxCauses bounds the causes a Logger keeps: past it, new causes share
// one more, the cause "" (their lines are then limited together).
const maxCauses = 64

// A Logger writes rate-limited lines. The zero value writes to
// slog.Default(), read at each line. It is safe for concurrent use.
type Logger struct {
	out *slog.Logger // nil: slog.Default()

	// counts is held by flush and Flush from taking a cause's pending
	// count until its line is written, so that a Flush returns after the
	// line of a flush that was under way: its caller's next line (a
	// circuit breaker closing) then comes after every count. It is taken
	// before mu. Flush waits for it at most flushWait (see lockCounts).
	counts sync.Mutex
	mu     sync.Mutex
	causes map[string]*cause
}

// New returns a Logger that writes to out; nil means slog.Default(), read
// at each line.
func New(out *slog.Logger) *Logger { return &Logger{out: out} }

// cause is the state of one cause's lines.
type cause struct {
	last    time.Time // when its last line was written; zero: never
	pending int64     // occurrences since that line
	timer   *time.Timer
	// The first pending occurrence's line, repeated with the count.
	level slog.Level
	msg   string
	attrs []slog.Attr
}

func (l *Logger) logger() *slog.Logger {
	if l.out != nil {
		return l.out
	}
	return slog.Default()
}

// Enabled reports whether a line at level would be written at all.
func (l *Logger) Enabled(ctx context.Context, level slog.Level) bool {
	return l.logger().Enabled(ctx, level)
}

// Log writes msg with attrs at level for n occurrences (n ≥ 1) of key's
// cause, unless a line of that cause was written within the last
// Interval: then it counts them, and a line with msg, the attrs of the
// first of them and "repeated" (their count) follows when the Interval
// ends. Lines at a disabled level cost an Enabled check.
func (l *Logger) Log(ctx context.Context, key string, n int64, level slog.Level, msg string, attrs ...slog.Attr) {
	out := l.logger()
	if !out.Enabled(ctx, level) {
		return
	}
	now := time.Now()
	l.mu.Lock()
	c := l.cause(key)
	if c.timer == nil && (c.last.IsZero() || now.Sub(c.last) >= Interval) {
		c.last = now
		l.mu.Unlock()
		if n > 1 {
			attrs = append(attrs, slog.Int64("count", n))
		}
		out.LogAttrs(ctx, level, msg, attrs...)
		return
	}
	if c.pending == 0 {
		c.level, c.msg, c.attrs = level, msg, append([]slog.Attr(nil), attrs...)
	}
	c.pending += n
	if c.timer == nil {
		c.timer = time.AfterFunc(Interval-now.Sub(c.last), func() { l.flush(c) })
	}
	l.mu.Unlock()
}

// cause returns key's state, made on first use. l.mu is held.
func (l *Logger) cause(key string) *cause {
	if c, ok := l.causes[key]; ok {
		return c
	}
	if l.causes == nil {
		l.causes = make(map[string]*cause)
	}
	if len(l.causes) >= maxCauses {
		key = ""
		if c, ok := l.causes[key]; ok {
			return c
		}
	}
	c := new(cause)
	l.causes[key] = c
	return c
}

// Flush writes now the lines that count each cause's pending occurrences,
// oldest cause first, instead of when their Intervals end: a caller about
// to write a line that closes a story (a circuit breaker closing) flushes
// first, so that no count of the story arrives after its end.
func (l *Logger) Flush() {
	type line struct {
		at    time.Time
		n     int64
		level slog.Level
		msg   string
		attrs []slog.Attr
	}
	var lines []line
	if l.lockCounts() {
		defer l.counts.Unlock()
	}
	now := time.Now()
	l.mu.Lock()
	for _, c := range l.causes {
		if c.pending == 0 {
			continue
		}
		lines = append(lines, line{c.last, c.pending, c.level, c.msg, c.attrs})
		c.pending, c.attrs, c.last = 0, nil, now
		if c.timer != nil {
			c.timer.Stop() // should it be firing, its flush finds nothing pending
			c.timer = nil
		}
	}
	l.mu.Unlock()
	slices.SortFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	for _, ln := range lines {
		l.logger().LogAttrs(context.Background(), ln.level, ln.msg, append(ln.attrs, slog.Int64("repeated", ln.n))...)
	}
}

// flushWait bounds how long Flush waits for a line under way, polling
// every flushPoll.
const (
	flushWait = 100 * time.Millisecond
	flushPoll = 50 * time.Microsecond
)

// lockCounts takes counts for Flush and reports true, or reports false
// after flushWait: a handler that reaches Flush while it writes one of
// this Logger's counts (through a Limiter whose breaker logs here) must
// not wait for itself. Its lines may then come before that count.
func (l *Logger) lockCounts() bool {
	if l.counts.TryLock() {
		return true
	}
	for deadline := time.Now().Add(flushWait); time.Now().Before(deadline); {
		time.Sleep(flushPoll)
		if l.counts.TryLock() {
			return true
		}
	}
	return false
}

// flush writes the line that counts c's pending occurrences.
func (l *Logger) flush(c *cause) {
	l.counts.Lock()
	defer l.counts.Unlock()
	l.mu.Lock()
	n, level, msg, attrs := c.pending, c.level, c.msg, c.attrs
	c.pending, c.attrs, c.timer = 0, nil, nil
	c.last = time.Now()
	l.mu.Unlock()
	if n > 0 {
		l.logger().LogAttrs(context.Background(), level, msg, append(attrs, slog.Int64("repeated", n))...)
	}
}

// Cause returns the text of the failure at the root of err's chain,
// without what wrappers add (the operation and key a store names): for a
// network error, the operation, network, remote address and the system
// call's error ("dial tcp 127.0.0.1:6379: connect: connection refused",
// without the local address, which changes with every connection);
// otherwise the innermost error's text ("context deadline exceeded").
// Loggers group failures by it, and show it: it names no key.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		s := op.Op + " " + op.Net
		if op.Addr != nil {
			s += " " + op.Addr.String()
		}
		return s + ": " + op.Err.Error()
	}
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if e != nil {
					next = e // the last: "%w: %w" puts the detail after the kind
				}
			}
		}
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
