package core_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/core"
)

// capture is a slog.Handler that keeps the records it is given.
type capture struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.records = append(c.records, r.Clone())
	c.mu.Unlock()
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

// lines returns the records so far, each as its level, message and
// attributes.
func (c *capture) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.records))
	for i, r := range c.records {
		var b strings.Builder
		fmt.Fprintf(&b, "%v %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		out[i] = b.String()
	}
	return out
}

// A burst of failures of one cause is one line at once and one line with
// the count of the rest; the key never shows; the hook still hears each.
func TestLogsABurstOfFailuresOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &capture{}
		s := &flakyStore{}
		lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithName("api"),
			core.WithBreaker(core.Breaker{Disabled: true}), core.WithLogger(slog.New(logs)))
		ctx := context.Background()
		fail := func(n int) {
			for i := range n {
				key := fmt.Sprintf("secret-%d", i)
				s.fail(fmt.Errorf("redisstore: take %q: %w", key, refusedErr))
				lim.Allow(ctx, key)
			}
		}
		fail(100)
		want := "WARN tollgate: store failed; the failure policy answers limiter=api op=take policy=fail-open error=dial tcp: connect: connection refused"
		if got := logs.lines(); len(got) != 1 || got[0] != want {
			t.Fatalf("100 failures at once logged %q, want one line: %q", got, want)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := logs.lines(); len(got) != 2 || got[1] != want+" repeated=99" {
			t.Fatalf("a second later the log holds %q, want the first line and %q", got, want+" repeated=99")
		}
		time.Sleep(5 * time.Second) // quiet: the next failure is a burst of its own
		fail(1)
		if got := logs.lines(); len(got) != 3 || got[2] != want {
			t.Errorf("a failure after a quiet spell logged %q, want a third line %q", got, want)
		}
		for _, l := range logs.lines() {
			if strings.Contains(l, "secret") {
				t.Errorf("a log line names a key: %q", l)
			}
		}
		if hooked.Load() != 101 {
			t.Errorf("the error hook heard %d failures, want all 101", hooked.Load())
		}
	})
}

// Causes are limited apart: a timeout does not hide a refusal.
func TestLogsEachCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &capture{}
		s := &flakyStore{}
		lim, _ := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen),
			core.WithBreaker(core.Breaker{Disabled: true}), core.WithLogger(slog.New(logs)))
		for range 3 {
			s.fail(fmt.Errorf("store: %w", context.DeadlineExceeded))
			lim.Allow(context.Background(), "k")
			s.fail(refusedErr)
			lim.Allow(context.Background(), "k")
		}
		got := logs.lines()
		if len(got) != 2 || !strings.HasSuffix(got[0], "error=context deadline exceeded") ||
			!strings.HasSuffix(got[1], "error=dial tcp: connect: connection refused") {
			t.Errorf("two causes, three failures each, logged %q; want one line per cause", got)
		}
	})
}

// The breaker's opening and closing are logged, with the part and the
// cause; its probes only at debug level.
func TestLogsBreakerOpeningAndClosing(t *testing.T) {
	const wantOpen = "ERROR tollgate: circuit breaker opened: calls skip the store, answered by the failure policy, until a probe succeeds"
	t.Run("a part that refuses opens its breaker", func(t *testing.T) {
		logs := &capture{}
		lim, _ := newPolicyLimiter(t, &partedStore{}, core.WithFailurePolicy(core.FailOpen), core.WithName("api"),
			core.WithLogger(slog.New(logs)))
		lim.Allow(context.Background(), "a1")
		got := logs.lines()
		want := wantOpen + " limiter=api part=A error=dial tcp: connect: connection refused"
		if len(got) != 2 || got[1] != want || !strings.HasPrefix(got[0], "WARN tollgate: store failed") {
			t.Errorf("a refusal logged %q; want the failure, then %q", got, want)
		}
	})
	t.Run("a store that comes back closes it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			logs := &capture{}
			s := &flakyStore{}
			lim, _ := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithName("api"),
				core.WithBreaker(core.Breaker{CoolDown: time.Second}), core.WithLogger(slog.New(logs)))
			ctx := context.Background()
			s.fail(refusedErr)
			lim.Allow(ctx, "k")
			time.Sleep(time.Second)
			lim.Allow(ctx, "k") // a probe that fails: debug only
			time.Sleep(time.Second)
			s.err.Store(nil)
			lim.Allow(ctx, "k") // a probe that succeeds
			got := logs.lines()
			want := []string{
				"WARN tollgate: store failed; the failure policy answers limiter=api op=take policy=fail-open error=dial tcp: connect: connection refused",
				wantOpen + " limiter=api error=dial tcp: connect: connection refused",
				"DEBUG tollgate: circuit breaker probing the store limiter=api",
				"WARN tollgate: store failed; the failure policy answers limiter=api op=take policy=fail-open error=dial tcp: connect: connection refused",
				"DEBUG tollgate: circuit breaker probe failed limiter=api error=dial tcp: connect: connection refused",
				"DEBUG tollgate: circuit breaker probing the store limiter=api",
				"INFO tollgate: circuit breaker closed: the store answers again limiter=api",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("an outage and a recovery logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	})
}

// A Limiter logs to slog.Default() unless told otherwise, and WithLogger
// rejects nil (silence is a logger that discards).
func TestLoggerDefaultAndOption(t *testing.T) {
	logs := &capture{}
	prev := slog.Default()
	slog.SetDefault(slog.New(logs))
	defer slog.SetDefault(prev)
	s := &flakyStore{}
	s.fail(errDown)
	lim, _ := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen))
	lim.Allow(context.Background(), "k")
	if got := logs.lines(); len(got) != 1 {
		t.Errorf("a failure with no logger given logged %q to slog.Default(), want one line", got)
	}
	quiet, _ := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithLogger(discard()))
	quiet.Allow(context.Background(), "k2")
	if got := logs.lines(); len(got) != 1 {
		t.Errorf("a Limiter given a discarding logger logged to slog.Default(): %q", got)
	}
	if _, err := core.New(s, core.PerSecond(1), core.WithLogger(nil)); !errors.Is(err, core.ErrInvalidOption) {
		t.Errorf("New(WithLogger(nil)) = %v, want ErrInvalidOption", err)
	}
}

// An outage under load, as an operator reads it: each line about the
// failures comes before the breaker's closing, at most one a second, and
// their counts add up to the requests the failure policy answered, calls
// skipped by the open breaker included.
func TestLogsAnOutageInOrderWithCountsOfRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &capture{}
		s := &flakyStore{}
		lim, _ := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithName("api"),
			core.WithLogger(slog.New(logs)))
		ctx := context.Background()
		answered := 0
		load := func(d time.Duration) { // 200 requests a second
			for range int(d / (5 * time.Millisecond)) {
				if d, err := lim.Allow(ctx, "k"); err == nil && d.Source == core.FromFailOpen {
					answered++
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		load(time.Second)
		s.fail(refusedErr)
		load(3 * time.Second)
		s.err.Store(nil)
		load(time.Second)
		time.Sleep(3 * time.Second) // any line still pending would be written by now
		got := logs.lines()
		counted, failureLines, closedAt := 0, 0, -1
		for i, line := range got {
			switch {
			case strings.HasPrefix(line, "INFO tollgate: circuit breaker closed"):
				closedAt = i
			case strings.HasPrefix(line, "WARN tollgate: store failed"):
				failureLines++
				if closedAt >= 0 {
					t.Errorf("line %d, %q, comes after the breaker closed (line %d):\n%s", i, line, closedAt, strings.Join(got, "\n"))
				}
				n := 1
				if _, r, ok := strings.Cut(line, " repeated="); ok {
					fmt.Sscan(r, &n)
				}
				counted += n
			}
		}
		if closedAt < 0 {
			t.Fatalf("no line says the breaker closed:\n%s", strings.Join(got, "\n"))
		}
		if counted != answered {
			t.Errorf("failure lines count %d requests, want the %d the failure policy answered:\n%s", counted, answered, strings.Join(got, "\n"))
		}
		if failureLines > 5 {
			t.Errorf("%d failure lines for a 3 s outage, want at most one a second:\n%s", failureLines, strings.Join(got, "\n"))
		}
	})
}
