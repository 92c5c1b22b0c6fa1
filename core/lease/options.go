package lease

import (
	"fmt"
	"math"
	"time"

	"github.com/tollgate/tollgate/core"
)

// Defaults of the options.
const (
	// DefaultMaxLease is how long reserved units may be held at most.
	DefaultMaxLease = time.Second
	// DefaultRenewInterval is how much of a key's recent demand one
	// reservation aims to cover.
	DefaultRenewInterval = 20 * time.Millisecond
	// DefaultShare is the largest fraction of the shared remaining units
	// one reservation takes.
	DefaultShare = 0.25
	// DefaultMinLease is the shortest lease worth reserving ahead for.
	DefaultMinLease = 2 * time.Millisecond
	// DefaultMaxKeys bounds the keys an instance holds allowances for.
	DefaultMaxKeys = 10_000
)

// An Option configures a Store.
type Option func(*config) error

type config struct {
	maxLease time.Duration
	renew    time.Duration
	share    float64
	minLease time.Duration
	maxKeys  int
	minSlice int64
	timeout  time.Duration
	clock    core.Clock // nil: the system's monotonic clock
}

// WithMaxLease bounds how long units reserved from the shared store may be
// held before they are spent or given back: it bounds what a crashed
// instance strands (its unspent units, until their lease ends) and how long
// a TokenBucket's or GCRA's units may sit unused. Window algorithms end
// their leases at their window's (or bucket's) boundary anyway. d must be
// positive. Default: DefaultMaxLease (1s).
func WithMaxLease(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: lease.WithMaxLease(%v): want a positive duration", core.ErrInvalidOption, d)
		}
		c.maxLease = d
		return nil
	}
}

// WithRenewInterval sets how much demand a reservation aims to cover: a
// key's recent demand at this instance (units per second, an exponentially
// weighted average) times d. A reservation is renewed, off the request
// path, once half of it is spent. Shorter intervals hold fewer units idle
// (fairer near exhaustion), longer ones make fewer round trips. d must be
// positive. Default: DefaultRenewInterval (20ms).
func WithRenewInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: lease.WithRenewInterval(%v): want a positive duration", core.ErrInvalidOption, d)
		}
		c.renew = d
		return nil
	}
}

// WithShare caps each reservation at fraction f of the units the shared
// store reported remaining at the instance's last reservation, so that no
// instance takes the whole remainder of a quota other instances are asking
// for too, and reservations shrink to single requests as the quota runs
// out (when f × remaining is below one unit). f must be in (0, 1].
// Default: DefaultShare (0.25).
func WithShare(f float64) Option {
	return func(c *config) error {
		if !(f > 0 && f <= 1) || math.IsNaN(f) {
			return fmt.Errorf("%w: lease.WithShare(%v): want a fraction in (0, 1]", core.ErrInvalidOption, f)
		}
		c.share = f
		return nil
	}
}

// WithMinLease sets the shortest lease worth reserving ahead for: when a
// reservation made now would have to end sooner (a window about to roll
// over, a token bucket about to be full), requests go to the shared store
// one by one instead. d must be positive. Default: DefaultMinLease (2ms).
func WithMinLease(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: lease.WithMinLease(%v): want a positive duration", core.ErrInvalidOption, d)
		}
		c.minLease = d
		return nil
	}
}

// WithMaxKeys bounds the keys the Store keeps an allowance for. A new key
// past the bound evicts one: a key holding no units if the sample finds one
// (nothing is lost), else the least recently used sampled key, whose units
// are given back to the shared store (never kept, never invented). n must
// be at least 1. Default: DefaultMaxKeys (10,000).
func WithMaxKeys(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: lease.WithMaxKeys(%d): want at least 1", core.ErrInvalidOption, n)
		}
		c.maxKeys = n
		return nil
	}
}

// WithMinSlice makes every reservation of a key after its first hold at
// least n units ahead, whatever the key's measured demand, within the
// same caps (a share of the remaining units, the capacity, a lease long
// enough): keys turn local from their second request, at the price of up
// to n units held per key and instance. n must not be negative. Default:
// 0, slices from measured demand only.
func WithMinSlice(n int64) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: lease.WithMinSlice(%d): want at least 0", core.ErrInvalidOption, n)
		}
		c.minSlice = n
		return nil
	}
}

// WithTimeout bounds the Store's own calls to the shared store: renewals
// made off the request path and give-backs. Calls made for a request run
// under the request's context. d must be positive. Default:
// core.DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: lease.WithTimeout(%v): want a positive duration", core.ErrInvalidOption, d)
		}
		c.timeout = d
		return nil
	}
}

// WithClock sets the clock that times leases for operations whose
// engine.Op.Now is 0 (a core.Limiter without WithClock). Leases are timed
// by durations the shared store reports, measured from the instant a
// reservation was sent, so the clock needs the right rate, not the shared
// store's offset. clock must not be nil. Default: the system's monotonic
// clock.
func WithClock(clock core.Clock) Option {
	return func(c *config) error {
		if clock == nil {
			return fmt.Errorf("%w: lease.WithClock(nil)", core.ErrInvalidOption)
		}
		c.clock = clock
		return nil
	}
}
