package adaptive

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/tollgate/tollgate/core"
)

// Defaults of the options.
const (
	DefaultInitialLimit   = 20
	DefaultMinLimit       = 1
	DefaultMaxLimit       = 1000
	DefaultSheddableShare = 0.5
	DefaultMinSamples     = 20
	DefaultLatencies      = 10
	DefaultMinWindow      = time.Millisecond
	DefaultMaxWindow      = time.Second
	DefaultName           = "adaptive"
)

// An Option configures a Limiter. An option given an argument it cannot
// use makes New return an error wrapping ErrInvalidOption that names it.
type Option func(*config)

type config struct {
	alg        Algorithm
	initial    float64
	min, max   float64
	share      float64
	minSamples int
	latencies  float64
	minWin     time.Duration
	maxWin     time.Duration
	clock      core.Clock
	name       string
	obs        core.Observer
	logger     *slog.Logger
	err        error
}

func (c *config) invalid(option string, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s: %s", ErrInvalidOption, option, fmt.Sprintf(format, args...))
	}
}

// WithAlgorithm sets the algorithm that computes the limit: Gradient or
// AIMD (their fields are checked here), or one of the caller's. alg must
// not be nil. Default: Gradient{}.
func WithAlgorithm(alg Algorithm) Option {
	return func(c *config) {
		var err error
		switch a := alg.(type) {
		case nil:
			c.invalid("WithAlgorithm", "nil algorithm")
			return
		case Gradient:
			err = a.validate()
		case AIMD:
			err = a.validate()
		}
		if err != nil {
			c.invalid("WithAlgorithm", "%v", err)
			return
		}
		c.alg = alg
	}
}

// WithInitialLimit sets the limit before the first window ends. It is
// clamped to [WithMinLimit, WithMaxLimit]; it must be at least 1.
// Default: DefaultInitialLimit (20).
func WithInitialLimit(n int) Option {
	return limitOption("WithInitialLimit", n, func(c *config, v float64) { c.initial = v })
}

// WithMinLimit sets the floor of the limit: the units in flight it always
// admits (critical ones), however latency grows. At least 1. Default:
// DefaultMinLimit (1).
func WithMinLimit(n int) Option {
	return limitOption("WithMinLimit", n, func(c *config, v float64) { c.min = v })
}

// WithMaxLimit sets the ceiling of the limit. At least WithMinLimit's.
// Default: DefaultMaxLimit (1000).
func WithMaxLimit(n int) Option {
	return limitOption("WithMaxLimit", n, func(c *config, v float64) { c.max = v })
}

// limitOption is the Option called name that sets a limit of n units
// with set, or rejects n below 1.
func limitOption(name string, n int, set func(*config, float64)) Option {
	return func(c *config) {
		if n < 1 {
			c.invalid(name, "%d: want at least 1", n)
			return
		}
		set(c, float64(n))
	}
}

// WithSheddableShare sets s: Sheddable requests are admitted only while
// the units in flight are below ⌈s·L⌉. In [0, 1]; 1 makes the two
// priorities alike, 0 refuses every sheddable request. Default:
// DefaultSheddableShare (0.5).
func WithSheddableShare(s float64) Option {
	return func(c *config) {
		if !(s >= 0 && s <= 1) {
			c.invalid("WithSheddableShare", "%v: want in [0, 1]", s)
			return
		}
		c.share = s
	}
}

// WithWindow sets the windows of samples the limit is updated from: a
// window ends at the first release at least latencies × the no-load
// latency estimate after it began (within [minWindow, maxWindow]) with at
// least minSamples samples, or, with fewer, at least maxWindow after it
// began. minSamples ≥ 1, latencies > 0, 0 < minWindow ≤ maxWindow.
// Default: 20 samples, 10 latencies, 1 ms to 1 s.
func WithWindow(minSamples int, latencies float64, minWindow, maxWindow time.Duration) Option {
	return func(c *config) {
		switch {
		case minSamples < 1:
			c.invalid("WithWindow", "%d samples: want at least 1", minSamples)
		case !(latencies > 0) || math.IsInf(latencies, 0):
			c.invalid("WithWindow", "%v latencies: want above 0", latencies)
		case minWindow <= 0 || maxWindow < minWindow:
			c.invalid("WithWindow", "window %v to %v: want 0 < min ≤ max", minWindow, maxWindow)
		default:
			c.minSamples, c.latencies, c.minWin, c.maxWin = minSamples, latencies, minWindow, maxWindow
		}
	}
}

// WithClock sets the clock latencies and windows are measured with: tests
// pass a virtual one. clock must not be nil. Default: the wall clock.
func WithClock(clock core.Clock) Option {
	return func(c *config) {
		if clock == nil {
			c.invalid("WithClock", "nil clock")
			return
		}
		c.clock = clock
	}
}

// WithName names the Limiter in its events (core.Event.Limiter) and log
// lines. Default: DefaultName ("adaptive").
func WithName(name string) Option {
	return func(c *config) {
		if name == "" {
			c.invalid("WithName", "empty name")
			return
		}
		c.name = name
	}
}

// WithObserver reports, at the end of every window, a core.Event of kind
// core.EventAdaptive: the limit, the units in flight, the no-load latency
// estimate and the requests shed in the window (Count). Given several
// times, it reports to each. obs must not be nil. Default: none.
func WithObserver(obs core.Observer) Option {
	return func(c *config) {
		if obs == nil {
			c.invalid("WithObserver", "nil observer")
			return
		}
		c.obs = core.JoinObservers(c.obs, obs)
	}
}

// WithLogger makes the Limiter log to logger when it starts shedding
// (warn) and when it stops (info, with the count shed), at most about a
// line a second. logger must not be nil: to log nothing, pass
// slog.New(slog.DiscardHandler). Default: slog.Default(), read when a
// line is written.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) {
		if logger == nil {
			c.invalid("WithLogger", "nil logger: to log nothing, pass slog.New(slog.DiscardHandler)")
			return
		}
		c.logger = logger
	}
}
