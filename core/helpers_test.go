package core_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// t0 is the fixed instant the step tables start from: 2023-11-15T00:00:00Z,
// a day boundary of the Unix epoch, so also an hour, minute and second
// boundary. Epoch-aligned windows of any of those lengths start at t0.
var t0 = time.Unix(1_700_006_400, 0)

// manualClock is a core.Clock that only moves when told to.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock(t time.Time) *manualClock { return &manualClock{now: t} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, forward or back.
func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// newLimiter returns a Limiter over a fresh memstore (without its background
// sweeper) whose time is clock.
func newLimiter(t *testing.T, clock core.Clock, opts ...core.Option) *core.Limiter {
	t.Helper()
	store := memstore.New(memstore.WithSweepInterval(0))
	t.Cleanup(func() { store.Close() })
	lim, err := core.New(store, append(opts, core.WithClock(clock))...)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	return lim
}

// result is the part of a Decision (or LimitState) that step tables check.
type result struct {
	Allowed    bool
	Remaining  int64
	ResetAfter time.Duration
	RetryAfter time.Duration
	Delay      time.Duration
}

func (r result) String() string {
	retry := r.RetryAfter.String()
	if r.RetryAfter == core.Never {
		retry = "Never"
	}
	s := fmt.Sprintf("{Allowed:%v Remaining:%d ResetAfter:%v RetryAfter:%s", r.Allowed, r.Remaining, r.ResetAfter, retry)
	if r.Delay != 0 {
		s += fmt.Sprintf(" Delay:%v", r.Delay)
	}
	return s + "}"
}

func resultOf(d core.Decision) result {
	return result{Allowed: d.Allowed, Remaining: d.Remaining, ResetAfter: d.ResetAfter, RetryAfter: d.RetryAfter, Delay: d.Delay}
}

func stateResult(s core.LimitState) result {
	return result{Allowed: s.Allowed, Remaining: s.Remaining, ResetAfter: s.ResetAfter, RetryAfter: s.RetryAfter, Delay: s.Delay}
}

// Shorthands for the wanted results of step tables.

// ok is an allowed operation leaving rem units, fully replenished after reset.
func ok(rem int64, reset time.Duration) result {
	return result{Allowed: true, Remaining: rem, ResetAfter: reset}
}

// queued is an allowed LeakyBucket operation served after delay.
func queued(rem int64, reset, delay time.Duration) result {
	return result{Allowed: true, Remaining: rem, ResetAfter: reset, Delay: delay}
}

// denied is a denied operation that could pass after retry.
func denied(rem int64, reset, retry time.Duration) result {
	return result{Remaining: rem, ResetAfter: reset, RetryAfter: retry}
}

// discard returns a logger that writes nothing.
func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// logBuffer is a strings.Builder a Limiter's logger may write to from
// another goroutine: the count of a repeated line comes from a timer, a
// second after the first line, while a test may be reading.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
