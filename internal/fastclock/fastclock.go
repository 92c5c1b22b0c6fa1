// Package fastclock reads the monotonic clock through the CPU's time-stamp
// counter where the operating system vouches for it, for a store that
// reads the time on every decision.
//
// time.Since costs about 40 ns on an amd64 Linux machine: a switch to the
// system stack, the vDSO's clock_gettime, and an RDTSCP that waits for
// every instruction before it to finish. Reading the counter with RDTSC
// costs about 12 ns and does not wait. A Clock turns the counter's ticks
// into the monotonic clock's nanoseconds with a rate it measures against
// that clock (time.Since), and anchors the two clocks together again every
// 100 ms of ticks (span), so that a small error in the rate never adds up
// past a span's share of it.
//
// The counter is used only where the kernel keeps its own clock on it
// (Linux with the tsc clocksource: the kernel has checked that it is
// invariant and synchronised across CPUs) and the CPU says it is
// invariant; elsewhere, and under the purego build tag, a Clock reads
// time.Since. A Clock also falls back to time.Since on every read until it
// has measured the rate over 10 ms, whenever a read of the counter is
// behind its anchor (a CPU whose counter lags), and when an anchoring
// finds that the rate it measured predicted the monotonic clock wrongly
// by more than 0.1% (a migrated virtual machine): it then measures the
// rate afresh.
package fastclock

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// A Clock tells the nanoseconds elapsed since it was made, on the
// monotonic clock. It is safe for concurrent use.
type Clock struct {
	p     atomic.Pointer[params] // nil: read mono (not yet calibrated, or learning the rate afresh)
	ref   atomic.Pointer[sample] // the sample the rate is measured from: the oldest still trusted
	ticks func() uint64          // the counter; nil: none usable, read mono
	mono  func() (int64, bool)   // the monotonic clock, in ns since the Clock was made; false: not (see New)
}

// params turn a tick into nanoseconds, for span ticks after tick0.
type params struct {
	tick0 uint64 // the counter at the anchor
	ns0   int64  // the monotonic clock at the anchor
	mult  uint64 // ns per tick, in 32.32 fixed point
	span  uint64 // ticks after tick0 for which the params hold; mult × span < 2^64
}

// A sample is one instant on both clocks.
type sample struct {
	tick uint64
	ns   int64
}

const (
	// spanNanos is how long (in ticks, as the rate converts them) an anchor
	// is used before the clocks are anchored together again.
	spanNanos = 100 * int64(time.Millisecond)
	// minBaseline is the least time over which the rate is measured before
	// the counter is used. Each sample's instant is known to within half
	// its width, typically 0.1µs and at most maxSampleWidth: the rate is
	// then off by 10^-5 typically, 2·10^-4 at worst, which a span turns
	// into 1µs, 20µs at worst. The rate is measured from the same reference
	// sample at every anchor after, over an ever longer baseline, and its
	// error falls as the baseline grows.
	minBaseline = 10 * int64(time.Millisecond)
	// maxSampleWidth bounds the time a sample's two reads of the monotonic
	// clock (about 40ns each), around its read of the counter, may span: a
	// wider one was interrupted, and its instant is not known well enough.
	maxSampleWidth = 2 * int64(time.Microsecond)
)

// For returns the Clock for a store that starts at start, a reading of
// time.Now, and the Clock's reading at start. With the monotonic reading
// time.Now gives outside a synctest bubble, that is the process's Clock
// (Shared): the counter's rate is the CPU's, so every store shares its
// measuring, and a store made after the first counts at once. Inside a
// bubble, time.Now has no monotonic reading and its fake clock is the
// only one: For returns a Clock of time.Since(start), which follows it,
// and 0.
func For(start time.Time) (c *Clock, at int64) {
	if start == start.Round(0) { // no monotonic reading
		return newClock(nil, func() (int64, bool) { return int64(time.Since(start)), true }), 0
	}
	c = Shared()
	return c, c.Nanos()
}

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
// Called from inside a synctest bubble, time.Since(start) is the bubble's
// fake time (which starts in 2000) less start's wall time: negative. The
// Clock then neither samples nor anchors (the counter knows no fake time),
// and returns that reading as it is, as time.Since would have.
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
	if ticks != nil {
		if s, ok := c.sample(); ok {
			c.ref.Store(s.copy())
		}
	}
	return c
}

// Nanos returns the nanoseconds elapsed since the Clock was made.
func (c *Clock) Nanos() int64 {
	if p := c.p.Load(); p != nil {
		if d := c.ticks() - p.tick0; d < p.span { // also false when the counter reads behind tick0
			return p.ns0 + int64(d*p.mult>>32)
		}
	}
	return c.anchor()
}

// Counting reports whether the Clock reads the counter now, rather than
// the monotonic clock on every read.
func (c *Clock) Counting() bool { return c.p.Load() != nil }

// anchor is Nanos when the current params do not hold: it reads the
// monotonic clock, and anchors the counter to it again when it can, with
// the rate measured since the reference sample.
func (c *Clock) anchor() int64 {
	ns, ok := c.mono()
	if !ok || c.ticks == nil {
		return ns
	}
	if ref := c.ref.Load(); ref != nil && c.p.Load() == nil && ns-ref.ns < minBaseline {
		return ns // still measuring the rate: one read of mono
	}
	now, ok := c.sample()
	if !ok {
		return ns
	}
	ref := c.ref.Load()
	if ref == nil || now.tick <= ref.tick || now.ns <= ref.ns {
		c.ref.Store(now.copy()) // the first good sample, or a counter that went back: start afresh
		return now.ns
	}
	old := c.p.Load()
	if old != nil && wrong(old, now) {
		// The rate no longer holds (the counter changed speed, or jumped):
		// measure it again from here, reading mono meanwhile.
		c.ref.Store(now.copy())
		c.p.CompareAndSwap(old, nil)
		return now.ns
	}
	dn, dt := uint64(now.ns-ref.ns), now.tick-ref.tick
	if int64(dn) < minBaseline || dn>>32 >= dt { // too short to measure; or a counter slower than 1 tick a ns>>32, which none is
		return now.ns
	}
	mult, _ := bits.Div64(dn>>32, dn<<32, dt)
	if mult == 0 {
		return now.ns
	}
	span := min(uint64(spanNanos)<<32/mult, ^uint64(0)/mult)
	c.p.CompareAndSwap(old, &params{tick0: now.tick, ns0: now.ns, mult: mult, span: span})
	return now.ns
}

// wrong reports whether p's prediction of now's nanoseconds from its tick
// is off by more than 0.1% of the time since p's anchor, and 50µs.
func wrong(p *params, now sample) bool {
	d := now.tick - p.tick0
	if now.tick < p.tick0 {
		return true
	}
	hi, lo := bits.Mul64(d, p.mult)
	if hi>>32 != 0 {
		return true // a prediction past 2^63 ns: the counter jumped
	}
	predicted := p.ns0 + int64(hi<<32|lo>>32)
	elapsed := now.ns - p.ns0
	off := predicted - now.ns
	if off < 0 {
		off = -off
	}
	return off > 50*int64(time.Microsecond)+elapsed/1000
}

// copy returns a copy of s on the heap: taking s's address would move
// every caller's sample there, on every read that anchors.
func (s sample) copy() *sample { return &s }

// sample reads the counter between two reads of the monotonic clock, and
// reports false when they are too far apart to place it.
func (c *Clock) sample() (sample, bool) {
	before, ok1 := c.mono()
	t := c.ticks()
	after, ok2 := c.mono()
	if !ok1 || !ok2 || after-before > maxSampleWidth || after < before {
		return sample{}, false
	}
	return sample{tick: t, ns: before + (after-before)/2}, true
}
