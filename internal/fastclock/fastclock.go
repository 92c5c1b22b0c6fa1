// Package fastclock reads the monotonic clock through the CPU's time-stamp
// counter where the operating system vouches for it, for a store that
// reads the time on every decision.
//
// time.Since costs about 40 ns on an amd64 Linux machine: a switch to the
// system stack, the vDSO's clock_gettime, and an RDTSCP that waits for
// every instruction before it to finish. Reading the counter with RDTSC
// costs about 12 ns and does not wait. A Clock turns the counter's ticks
// into the monotonic clock's nanoseconds at a rate it measures against
// that clock (time.Since, from a reference sample, over a baseline of at
// least 10 ms that grows as the Clock runs), and anchors the two clocks
// together again every 100 ms of ticks (span), so that an error in the
// rate never adds up past a span's share of it. A rate just measured is
// tried first: the Clock counts by it only once its anchor has predicted
// a sample 10 ms later.
//
// The counter is used only where the kernel keeps its own clock on it
// (Linux with the tsc clocksource: the kernel has checked that it is
// invariant and synchronised across CPUs), the CPU says it is invariant,
// and the build is not purego; elsewhere a Clock reads time.Since. A Clock
// also reads time.Since while it measures and tries the rate (its first
// 20 ms, and again after any of the cases below), on a read whose counter
// is behind its anchor (a CPU whose counter lags), and while another
// goroutine anchors it. It measures the rate afresh when an anchoring
// finds that the rate predicted the monotonic clock wrongly by more than
// 50 µs plus 0.1% of the time since the anchor (a migrated virtual
// machine; a suspend, during which the counter ran and the monotonic clock
// did not), when the counter reads far behind its anchor, when a measured
// rate is one no counter has (31 MHz to 32 GHz), and when it had no read
// for more than a second while measuring.
//
// While the counter keeps the rate measured, a read is within that
// 50 µs + 0.1% of the monotonic clock (typically within a microsecond),
// and an anchoring may step the Clock back by as much. When the counter
// jumps or changes rate within a span, reads are off by up to the jump
// (a suspend's length, say) until the span ends, at most 100 ms of ticks
// later; the anchoring then finds the error and steps the Clock to the
// monotonic clock, back if it was ahead.
package fastclock

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// A Clock tells the nanoseconds elapsed since it was made, on the
// monotonic clock. It is safe for concurrent use.
type Clock struct {
	st       atomic.Pointer[state] // never nil; replaced whole by the goroutine that holds sampling
	sampling atomic.Bool           // a goroutine is sampling and anchoring: only one at a time
	retry    atomic.Int64          // mono's reading before which no sample is tried (after a wide one)
	ticks    func() uint64         // the counter; nil: none usable, read mono
	mono     func() (int64, bool)  // the monotonic clock, in ns since the Clock was made; false: not (see New)
}

// state is a Clock's calibration, replaced whole so that a reader sees a
// reference sample and an anchor that belong together.
type state struct {
	ref      sample // the sample the rate is measured from; zero: none yet
	counting bool   // the anchor below holds: a read converts the counter
	trial    bool   // the anchor below awaits a sample minBaseline later that it predicts: reads still take mono
	tick0    uint64 // the counter at the anchor
	ns0      int64  // the monotonic clock at the anchor
	mult     uint64 // ns per tick, in 32.32 fixed point, minMult to maxMult
	span     uint64 // ticks after tick0 for which the anchor holds; span × mult < 2^64
}

// A sample is one instant on both clocks; set is false for none.
type sample struct {
	tick uint64
	ns   int64
	set  bool
}

const (
	// spanNanos is how long (in ticks, as the rate converts them) an anchor
	// is used before the clocks are anchored together again.
	spanNanos = 100 * int64(time.Millisecond)
	// minBaseline is the least time over which the rate is measured, and
	// then tried, before the counter is used. Each sample's instant is
	// known to within half its width, typically 0.1µs and at most
	// maxSampleWidth: the rate is then off by 10^-5 typically, 2·10^-4 at
	// worst, which a span turns into 1µs, 20µs at worst. The rate is
	// measured from the same reference sample at every anchor after, over
	// an ever longer baseline, and its error falls as the baseline grows.
	minBaseline = 10 * int64(time.Millisecond)
	// maxMeasuring is how long a reference sample may wait, while the
	// Clock measures, before it is too old to trust (a suspend may lie
	// between it and the next read): the next sample replaces it.
	maxMeasuring = int64(time.Second)
	// maxSampleWidth bounds the time a sample's two reads of the monotonic
	// clock (about 40ns each), around its read of the counter, may span: a
	// wider one was interrupted, and its instant is not known well enough.
	// After one, no sample is tried for retryAfter.
	maxSampleWidth = 2 * int64(time.Microsecond)
	retryAfter     = int64(time.Millisecond)
	// minMult and maxMult bound the rate: a counter of 31 MHz to 32 GHz.
	// A rate outside was measured across a jump of the counter.
	minMult = 1 << 27 // 1/32 ns a tick
	maxMult = 32 << 32
	// maxLag is how far behind its anchor a read of the counter may be and
	// still be a CPU whose counter lags a little: farther, the counter went
	// back, and the rate is measured afresh.
	maxLag = 1 << 17 // ticks: 55µs at 2.4 GHz, about wrong's 50µs
)

// For returns the Clock for a store that starts at start, a reading of
// time.Now. With the monotonic reading time.Now gives outside a synctest
// bubble, that is the process's Clock (Shared): the counter's rate is the
// CPU's, so every store shares its measuring, and a store made after the
// first counts at once. Inside a bubble, time.Now has no monotonic
// reading and its fake clock is the only one: For returns a Clock of
// time.Since(start), which follows it.
func For(start time.Time) *Clock {
	if start == start.Round(0) { // no monotonic reading
		return newClock(nil, func() (int64, bool) { return int64(time.Since(start)), true })
	}
	return Shared()
}

// A Wall tells the time in Unix µs: the wall time when it was made plus
// the monotonic time since, read through the Clock For gives. The stores
// read their default time from one (memstore, lease).
type Wall struct {
	c    *Clock
	base int64 // the Unix µs at NewWall less c's µs then
}

// NewWall returns a Wall that starts now. It reads the wall clock and its
// Clock one after the other once the Clock is made: the first Shared call
// of a process takes about 100 µs (CPUID, the clocksource's file), which
// the Wall would otherwise lag by for good.
func NewWall() Wall {
	c := For(time.Now())
	start := time.Now()
	return Wall{c, start.UnixMicro() - c.Nanos()/1000}
}

// Micros returns the time in Unix µs. The division is signed: a Clock
// read from a synctest bubble it was not made in may read negative (see
// New).
func (w Wall) Micros() int64 { return w.base + w.c.Nanos()/1000 }

// Shared returns the process's Clock, made at the first call.
func Shared() *Clock {
	sharedOnce.Do(func() { shared = New(time.Now()) })
	return shared
}

var (
	sharedOnce sync.Once
	shared     *Clock
)

// New returns a Clock that starts at start, a reading of time.Now with a
// monotonic reading, and reads the counter where it can.
//
// Read from inside a synctest bubble, time.Since(start) is the bubble's
// fake time (which starts in 2000) less start's wall time: negative. The
// Clock then takes no sample and leaves its calibration alone (the counter
// knows no fake time). While it counts, it goes on reading real time,
// from the counter; while it measures, it returns that negative reading,
// as time.Since did: a store made outside a bubble and used inside one
// reads real time, then, and not the bubble's.
func New(start time.Time) *Clock {
	return newClock(counter(), func() (int64, bool) {
		d := time.Since(start)
		return int64(d), d >= 0
	})
}

// newClock returns a Clock of the counter ticks (nil: none) and the
// monotonic clock mono, whose false says it is not (see New).
func newClock(ticks func() uint64, mono func() (int64, bool)) *Clock {
	c := &Clock{ticks: ticks, mono: mono}
	st := new(state)
	if ticks != nil {
		st.ref, _ = c.sample()
	}
	c.st.Store(st)
	return c
}

// Nanos returns the nanoseconds elapsed since the Clock was made.
func (c *Clock) Nanos() int64 {
	if s := c.st.Load(); s.counting {
		if d := c.ticks() - s.tick0; d < s.span { // also false when the counter reads behind tick0
			return s.ns0 + int64(d*s.mult>>32)
		}
	}
	return c.anchor()
}

// Counting reports whether the Clock reads the counter now, rather than
// the monotonic clock on every read.
func (c *Clock) Counting() bool { return c.st.Load().counting }

// anchor is Nanos when the anchor does not hold: it reads the monotonic
// clock, and, when no other goroutine is doing it, takes a sample and
// moves the Clock to its next state (next).
func (c *Clock) anchor() int64 {
	ns, ok := c.mono()
	if !ok {
		if s := c.st.Load(); s.counting { // see New: real time, from the anchor
			return s.extend(c.ticks())
		}
		return ns
	}
	if c.ticks == nil {
		return ns
	}
	if s := c.st.Load(); !s.counting && s.ref.set && ns >= s.since() && ns-s.since() < minBaseline {
		return ns // still measuring the rate, or trying it: one read of mono
	}
	if ns < c.retry.Load() || !c.sampling.CompareAndSwap(false, true) {
		return ns // a sample was wide a moment ago, or another goroutine is anchoring
	}
	defer c.sampling.Store(false)
	now, ok := c.sample()
	if !ok {
		c.retry.Store(ns + retryAfter)
		return ns
	}
	if n := next(c.st.Load(), now); n != nil {
		c.st.Store(n) // only the goroutine that holds sampling writes st
	}
	return now.ns
}

// next returns the state that follows s after sample now, or nil when s
// stays as it is. A rate measured over minBaseline is first tried: its
// anchor must predict a sample minBaseline later (wrong) before the Clock
// counts by it, so that a jump of the counter while the rate is measured
// (a suspend, in which the counter ran and the monotonic clock did not)
// is never counted by.
func next(s *state, now sample) *state {
	afresh := &state{ref: now}
	anchored := s.counting || s.trial
	switch {
	case !s.ref.set || now.tick <= s.ref.tick || now.ns <= s.ref.ns:
		return afresh // the first sample, or a counter that went back
	case anchored && now.tick < s.tick0:
		if s.tick0-now.tick <= maxLag {
			return nil // this CPU's counter lags a little: nothing to learn
		}
		return afresh
	case anchored && wrong(s, now):
		return afresh
	case !s.counting && now.ns-s.since() > maxMeasuring:
		return afresh
	case now.ns-s.since() < minBaseline:
		return nil
	}
	dn, dt := uint64(now.ns-s.ref.ns), now.tick-s.ref.tick
	if dn>>32 >= dt { // below 2^-32 ticks a ns: far below minMult
		return afresh
	}
	mult, _ := bits.Div64(dn>>32, dn<<32, dt)
	if mult < minMult || mult > maxMult {
		return afresh
	}
	// span × mult ≤ spanNanos·2^32 < 2^59: a read within it never overflows.
	return &state{ref: s.ref, counting: anchored, trial: !anchored, tick0: now.tick, ns0: now.ns, mult: mult, span: uint64(spanNanos) << 32 / mult}
}

// since returns the monotonic time from which s waits minBaseline for its
// next sample while it does not count: its reference's, or its trial
// anchor's.
func (s *state) since() int64 {
	if s.trial {
		return s.ns0
	}
	return s.ref.ns
}

// wrong reports whether s's prediction of now's nanoseconds from its tick
// (at or after s.tick0) is off by more than 0.1% of the time since s's
// anchor, and 50µs.
func wrong(s *state, now sample) bool {
	hi, lo := bits.Mul64(now.tick-s.tick0, s.mult)
	if hi>>31 != 0 {
		return true // a prediction past 2^63 ns: the counter jumped
	}
	elapsed := now.ns - s.ns0
	off := int64(hi<<32|lo>>32) - elapsed
	if off < 0 {
		off = -off
	}
	return off > 50*int64(time.Microsecond)+elapsed/1000
}

// extend returns s's prediction at tick t, past its span as well: for the
// reads of New's bubble case only.
func (s *state) extend(t uint64) int64 {
	if t < s.tick0 {
		return s.ns0
	}
	hi, lo := bits.Mul64(t-s.tick0, s.mult)
	if d := int64(hi<<32 | lo>>32); hi>>31 == 0 && d <= math.MaxInt64-s.ns0 {
		return s.ns0 + d
	}
	return math.MaxInt64
}

// sample reads the counter between two reads of the monotonic clock, and
// reports false when they are too far apart to place it.
func (c *Clock) sample() (sample, bool) {
	before, ok1 := c.mono()
	t := c.ticks()
	after, ok2 := c.mono()
	if !ok1 || !ok2 || after-before > maxSampleWidth || after < before {
		return sample{}, false
	}
	return sample{tick: t, ns: before + (after-before)/2, set: true}, true
}
