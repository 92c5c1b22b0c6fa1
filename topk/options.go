package topk

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/core"
)

// Defaults of New.
const (
	// DefaultCapacity is the default number of counters per window.
	DefaultCapacity = 1024
	// DefaultWindow is the default window: Top reports the denials of the
	// last 5 to 10 minutes.
	DefaultWindow = 5 * time.Minute
	// DefaultMaxKeyLen is the default length, in bytes, above which keys
	// are counted under their SHA-256 digest.
	DefaultMaxKeyLen = 128
	// MaxCapacity is the largest capacity New accepts.
	MaxCapacity = 1 << 20
)

// An Option configures a Tracker.
type Option func(*config)

type config struct {
	capacity  int
	window    time.Duration
	maxKeyLen int
	weighted  bool
	clock     core.Clock
	err       error // the first invalid option
}

func (c *config) invalid(option string, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s: %s", ErrInvalidOption, option, fmt.Sprintf(format, args...))
	}
}

// WithCapacity sets m, the number of counters of each window, between 1
// and MaxCapacity. A window of N denials reports every key denied more
// than N/m times, each count at most N/m too high: the error bound falls
// as m grows, and memory grows with it (see the package documentation).
// Default: DefaultCapacity.
func WithCapacity(m int) Option {
	return func(c *config) {
		if m < 1 || m > MaxCapacity {
			c.invalid("WithCapacity", "%d counters, want 1 to %d", m, MaxCapacity)
			return
		}
		c.capacity = m
	}
}

// WithWindow sets the window d: the tracker counts in windows of d, and
// Top merges the current window with the previous one, so it reports the
// denials of the last d to 2d. d = 0 counts from New or the last Reset,
// for ever. A negative d is invalid. Default: DefaultWindow.
func WithWindow(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.invalid("WithWindow", "negative window %v", d)
			return
		}
		c.window = d
	}
}

// WithMaxKeyLen makes keys longer than n bytes (n ≥ 1) be counted under
// their SHA-256 digest, so that the memory of a counter is bounded whatever
// the keys: Top reports such a key as the hex digest, with Entry.Long set.
// Digests live in a namespace of their own: no key of n bytes or fewer,
// whatever its bytes, shares a counter with a long key. Default:
// DefaultMaxKeyLen.
func WithMaxKeyLen(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.invalid("WithMaxKeyLen", "%d bytes, want at least 1", n)
			return
		}
		c.maxKeyLen = n
	}
}

// WithCostWeight makes Denied count a denial as its cost instead of 1, so
// that Top ranks keys by the units they were refused rather than by the
// number of requests. Add always counts what it is given. Default: false,
// one per denial.
func WithCostWeight(on bool) Option {
	return func(c *config) { c.weighted = on }
}

// WithClock sets the clock that places denials in windows and dates
// snapshots. clock must not be nil. Default: core.SystemClock().
func WithClock(clock core.Clock) Option {
	return func(c *config) {
		if clock == nil {
			c.invalid("WithClock", "nil clock")
			return
		}
		c.clock = clock
	}
}
