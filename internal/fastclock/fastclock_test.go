package fastclock

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A Clock on this machine's counter (or on time.Since where it has none)
// reads between two reads of the monotonic clock around it, within 100µs,
// before and after it starts counting, over several spans.
func TestAClockTracksTheMonotonicClock(t *testing.T) {
	t0 := time.Now()
	mono := func() int64 { return int64(time.Since(t0)) }
	c := newClock(counter(), func() (int64, bool) { return mono(), true })
	const tol = 100 * int64(time.Microsecond)
	counting, reads := int64(0), 0 // counting: the time of the first read that counted
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		before := mono()
		x := c.Nanos()
		after := mono()
		if x < before-tol || x > after+tol {
			t.Fatalf("read %d: Nanos() = %d, not within %d of [%d, %d] (counting: %v)", reads, x, tol, before, after, c.Counting())
		}
		reads++
		if c.Counting() && counting == 0 {
			counting = after
		}
		if counting != 0 && after-counting > 4*spanNanos || c.ticks == nil && after > minBaseline+4*spanNanos {
			break
		}
	}
	t.Logf("%d reads in %v; the counter is %v", reads, time.Since(t0), map[bool]string{true: "used", false: "not used here"}[c.ticks != nil])
	if c.ticks != nil && counting == 0 {
		t.Fatalf("the Clock never used the counter in %v of reads", time.Since(t0))
	}
	if c.ticks == nil && c.Counting() {
		t.Fatalf("a Clock without a counter says it counts")
	}
}

// fake is a counter and a monotonic clock that a test moves: ticks run at
// num/den per ns from offset, and each read of mono moves it by step.
type fake struct {
	mu       sync.Mutex
	ns       int64
	step     int64
	num, den uint64
	offset   uint64 // ticks at base
	base     int64  // the ns from which the current rate runs
	reads    atomic.Int64
}

func (f *fake) mono() (int64, bool) {
	f.reads.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ns += f.step
	return f.ns, true
}

// ticks reads the counter as of half a step after mono's last reading:
// between a sample's two reads of mono, whose middle is its instant.
func (f *fake) ticks() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offset + uint64(f.ns+f.step/2-f.base)*f.num/f.den
}

func (f *fake) advance(d time.Duration) {
	f.mu.Lock()
	f.ns += int64(d)
	f.mu.Unlock()
}

// setRate makes the ticks run at num/den per ns from now on, continuing
// from the current count.
func (f *fake) setRate(num, den uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset += uint64(f.ns-f.base) * f.num / f.den
	f.base, f.num, f.den = f.ns, num, den
}

func newFake() *fake { return &fake{ns: 1_000, num: 5, den: 2, offset: 1 << 40} } // 2.5 GHz

// calibrated returns a Clock of f that counts, having advanced f past the
// baseline.
func calibrated(t *testing.T, f *fake) *Clock {
	t.Helper()
	c := newClock(f.ticks, f.mono)
	if c.Counting() {
		t.Fatal("a new Clock counts before measuring the rate")
	}
	for range 12 {
		f.advance(10 * time.Millisecond)
		c.Nanos()
	}
	if !c.Counting() {
		t.Fatal("the Clock does not count after 120ms of good samples")
	}
	return c
}

// nanosNear checks that c reads f's time within 1ns (the rate's rounding).
func nanosNear(t *testing.T, c *Clock, f *fake, what string) {
	t.Helper()
	f.mu.Lock()
	want := f.ns
	f.mu.Unlock()
	if got := c.Nanos(); got < want-1 || got > want+1 {
		t.Fatalf("%s: Nanos() = %d, want %d (counting: %v)", what, got, want, c.Counting())
	}
}

// A Clock reads mono while it measures the rate (10ms) and while it tries
// it (10ms more), then counts without reading mono until its span ends.
func TestAClockCountsOnceItHasMeasuredTheRate(t *testing.T) {
	f := newFake()
	c := newClock(f.ticks, f.mono)
	f.advance(9 * time.Millisecond)
	nanosNear(t, c, f, "before the baseline") // reads mono: exact
	if c.Counting() {
		t.Fatal("the Clock counts after 9ms, less than its baseline")
	}
	f.advance(2 * time.Millisecond)
	nanosNear(t, c, f, "trying the rate") // measured at 11ms, tried until 21ms: mono still
	if c.Counting() || !c.st.Load().trial {
		t.Fatalf("after 11ms the Clock counts, or tries no rate: %+v", c.st.Load())
	}
	f.advance(9 * time.Millisecond)
	nanosNear(t, c, f, "trying the rate, 9ms on")
	if c.Counting() {
		t.Fatal("the Clock counts 9ms into its trial, less than its baseline")
	}
	f.advance(2 * time.Millisecond)
	c.Nanos()
	if !c.Counting() {
		t.Fatal("the Clock does not count after 22ms")
	}
	reads := f.reads.Load()
	for range 50 {
		f.advance(time.Millisecond) // 50ms: within the span
		nanosNear(t, c, f, "counting")
	}
	if calls := f.reads.Load() - reads; calls != 0 {
		t.Fatalf("counting, 50 reads read the monotonic clock %d times, want 0", calls)
	}
	f.advance(60 * time.Millisecond) // past the span: anchored again
	nanosNear(t, c, f, "past the span")
	if !c.Counting() {
		t.Fatal("the Clock stopped counting at a new anchor of the same rate")
	}
}

// When the counter's rate changes (a virtual machine moved to another
// host), the next anchor finds the prediction off, reads the monotonic
// clock while it measures the new rate, and then counts at it.
func TestAClockMeasuresAChangedRateAfresh(t *testing.T) {
	f := newFake()
	c := calibrated(t, f)
	f.setRate(3, 1) // 3 GHz from now
	f.advance(110 * time.Millisecond)
	nanosNear(t, c, f, "the first read at the new rate")
	if c.Counting() {
		t.Fatal("the Clock still counts after its rate predicted 2.5/3 of the time")
	}
	for range 9 {
		f.advance(time.Millisecond)
		nanosNear(t, c, f, "measuring the new rate")
	}
	countsAgain(t, c, f, 10, 10*time.Millisecond, "109ms after the change")
	for range 30 {
		f.advance(7 * time.Millisecond)
		nanosNear(t, c, f, "counting at the new rate")
	}
}

// countsAgain advances f n times by d, reading c each time, and checks
// that c counts then.
func countsAgain(t *testing.T, c *Clock, f *fake, n int, d time.Duration, when string) {
	t.Helper()
	for range n {
		f.advance(d)
		c.Nanos()
	}
	if !c.Counting() {
		t.Fatalf("the Clock does not count %s", when)
	}
}

// A counter that reads a little behind the anchor (a CPU whose counter
// lags) is not used for that read, and the Clock goes on counting; one
// far behind (a counter that went back) makes it measure the rate afresh.
func TestAClockReadsTheMonotonicClockWhenTheCounterIsBehind(t *testing.T) {
	for _, tc := range []struct {
		behind   uint64
		counting bool
	}{{1_000, true}, {maxLag, true}, {maxLag + 1, false}, {1 << 40, false}} {
		f := newFake()
		c := calibrated(t, f)
		back := f.ticks() - (c.st.Load().tick0 - tc.behind)
		f.mu.Lock()
		f.offset -= back // the counter now reads tc.behind ticks before the anchor
		f.mu.Unlock()
		reads := f.reads.Load()
		nanosNear(t, c, f, "behind the anchor")
		if f.reads.Load() == reads {
			t.Fatalf("%d ticks behind: a counter behind its anchor was read as a time before it", tc.behind)
		}
		if c.Counting() != tc.counting {
			t.Fatalf("%d ticks behind its anchor: counting %v, want %v", tc.behind, c.Counting(), tc.counting)
		}
	}
}

// A sample whose two reads of the monotonic clock are far apart (the
// goroutine was interrupted between them) is not used to measure the rate.
func TestAClockIgnoresAWideSample(t *testing.T) {
	f := newFake()
	f.step = 3 * int64(time.Microsecond) // each read of mono 3µs after the last: a sample spans 3µs
	c := newClock(f.ticks, f.mono)
	for range 30 {
		f.advance(10 * time.Millisecond)
		c.Nanos()
	}
	if c.Counting() || c.st.Load().ref.set {
		t.Fatalf("the Clock used samples 3µs wide: counting %v, reference %+v", c.Counting(), c.st.Load().ref)
	}
	f.step = int64(time.Microsecond) // 1µs wide: good
	countsAgain(t, c, f, 12, 10*time.Millisecond, "after 120ms of samples 1µs wide")
}

// A Clock without a counter reads the monotonic clock every time.
func TestAClockWithoutACounterReadsTheMonotonicClock(t *testing.T) {
	f := newFake()
	c := newClock(nil, f.mono)
	for range 30 {
		f.advance(10 * time.Millisecond)
		nanosNear(t, c, f, "no counter")
	}
	if c.Counting() {
		t.Fatal("a Clock without a counter counts")
	}
}

// Readers on many goroutines while the clock runs past several anchors
// (run under -race) each read a time within the fake's, never behind the
// time they last read by more than the rate's rounding.
func TestAClockIsSafeForConcurrentReads(t *testing.T) {
	f := newFake()
	c := calibrated(t, f)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				x := c.Nanos()
				if x < last-1 {
					t.Errorf("read %d after %d", x, last)
					return
				}
				last = x
			}
		}()
	}
	for range 200 {
		f.advance(3 * time.Millisecond) // 600ms: six anchors
		time.Sleep(50 * time.Microsecond)
	}
	close(stop)
	wg.Wait()
	nanosNear(t, c, f, "after the readers")
}

// A store made inside a synctest bubble gets a Clock of the bubble's fake
// time, which a sleep moves.
func TestForInABubbleFollowsTheFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := For(time.Now())
		at := c.Nanos()
		if c.ticks != nil {
			t.Fatal("For in a bubble returned a Clock that reads the counter")
		}
		time.Sleep(3 * time.Second)
		if d := c.Nanos() - at; d != int64(3*time.Second) {
			t.Fatalf("after a fake 3s sleep the Clock moved %v", time.Duration(d))
		}
	})
}

// Outside a bubble, For returns the process's Clock.
func TestForOutsideABubbleSharesTheProcessClock(t *testing.T) {
	if c := For(time.Now()); c != Shared() {
		t.Fatalf("For(time.Now()) = %p, want Shared() = %p", c, Shared())
	}
}

// A Clock made outside a bubble and read inside one (a store shared with
// a bubble's goroutines) takes no sample there: its rate and anchor are
// left as they were for the readers outside.
func TestAClockReadInABubbleKeepsItsCalibration(t *testing.T) {
	c := New(time.Now())
	for deadline := time.Now().Add(3 * time.Second); c.ticks != nil && !c.Counting() && time.Now().Before(deadline); {
		c.Nanos()
		time.Sleep(time.Millisecond)
	}
	if c.ticks != nil && !c.Counting() {
		t.Fatal("the Clock did not count within 3s")
	}
	before := c.Nanos()
	st := c.st.Load()
	synctest.Test(t, func(t *testing.T) {
		for range 3 {
			if x := c.anchor(); c.Counting() && x < before {
				t.Errorf("a read in a bubble of a counting Clock = %d, before the %d read outside it", x, before)
			}
			time.Sleep(time.Second)
		}
	})
	if c.st.Load() != st {
		t.Fatalf("reads in a bubble changed the Clock's state from %+v to %+v", st, c.st.Load())
	}
}

// A jump of the counter while the Clock measures its rate (a suspend, in
// which the counter ran and the monotonic clock did not) gives a rate no
// counter has: the Clock measures again from after the jump, and never
// counts at the wrong rate (which froze it for hours before).
func TestAClockMeasuresAgainAfterAJumpWhileMeasuring(t *testing.T) {
	f := newFake()
	c := jumpWhileMeasuring(f, time.Hour)
	f.advance(6 * time.Millisecond)
	nanosNear(t, c, f, "after the jump")
	if c.Counting() {
		t.Fatalf("the Clock counts at a rate measured across a jump: %+v", c.st.Load())
	}
	countsAgain(t, c, f, 5, 5*time.Millisecond, "25ms after the jump")
	for range 20 {
		f.advance(30 * time.Millisecond)
		nanosNear(t, c, f, "counting after the jump")
	}
}

// jumpWhileMeasuring returns a Clock of f that has measured for 5ms when
// f's counter jumps by d's worth of ticks, with no time passing.
func jumpWhileMeasuring(f *fake, d time.Duration) *Clock {
	c := newClock(f.ticks, f.mono)
	f.advance(5 * time.Millisecond)
	c.Nanos()
	f.mu.Lock()
	f.offset += uint64(d) * f.num / f.den
	f.mu.Unlock()
	return c
}

// A reference sample older than a second while the Clock measures (no
// read since: a suspend may lie between) is replaced, not used.
func TestAClockDropsAStaleReference(t *testing.T) {
	f := newFake()
	c := newClock(f.ticks, f.mono)
	ref := c.st.Load().ref
	f.advance(2 * time.Second)
	nanosNear(t, c, f, "after 2s without a read")
	if c.Counting() || c.st.Load().ref == ref {
		t.Fatalf("the Clock measured from a reference 2s old: %+v", c.st.Load())
	}
}

// An anchoring measures the rate afresh when the last one's rate was off
// by more than 50µs + 0.1% of the span (here 0.2%: 220µs over 110ms), and
// goes on counting when it was off by less (0.02%: 22µs).
func TestAClockToleratesASmallRateErrorOnly(t *testing.T) {
	for _, tc := range []struct {
		num, den uint64 // the new rate, against 5/2
		counting bool
	}{{5010, 2000, false}, {5001, 2000, true}} {
		f := newFake()
		c := calibrated(t, f)
		f.setRate(tc.num, tc.den)
		f.advance(110 * time.Millisecond)
		c.Nanos()
		if c.Counting() != tc.counting {
			t.Fatalf("rate %d/%d after 5/2: counting %v after a span, want %v", tc.num, tc.den, c.Counting(), tc.counting)
		}
	}
}

// A sample's instant is the middle of its two reads of the monotonic
// clock, where the counter was read between them.
func TestASampleIsAtTheMiddleOfItsReads(t *testing.T) {
	f := newFake()
	f.step = int64(time.Microsecond)
	c := calibrated(t, f)
	f.step = 0
	for range 5 {
		f.advance(3 * time.Millisecond)
		nanosNear(t, c, f, "anchored on samples 1µs wide")
	}
}

// After a wide sample, reads for the next millisecond read the monotonic
// clock once each and try no sample.
func TestAClockWaitsAfterAWideSample(t *testing.T) {
	f := newFake()
	c := calibrated(t, f)
	f.advance(110 * time.Millisecond) // past the span
	f.step = 3 * int64(time.Microsecond)
	reads := f.reads.Load()
	for range 10 {
		c.Nanos()
	}
	if n := f.reads.Load() - reads; n != 3+9 {
		t.Fatalf("10 reads after a wide sample read mono %d times, want 12 (one sample, then one read each)", n)
	}
	f.step = 0
	f.advance(2 * time.Millisecond)
	c.Nanos()
	if !c.Counting() {
		t.Fatal("the Clock does not anchor again 2ms after a wide sample")
	}
}

// A jump of the counter too small for the rate's bounds (1ms of ticks in
// a 10ms baseline: a rate 10% off) is caught by the trial: the Clock never
// counts at that rate, and its reads stay exact.
func TestAClockTriesARateBeforeCountingByIt(t *testing.T) {
	f := newFake()
	c := jumpWhileMeasuring(f, time.Millisecond)
	for range 40 {
		f.advance(time.Millisecond)
		nanosNear(t, c, f, "after a 1ms jump while measuring")
		if s := c.st.Load(); s.counting && (s.mult < 1717986918-1717986 || s.mult > 1717986918+1717986) {
			t.Fatalf("the Clock counts at %d, not 2^32/2.5 = 1717986918 within 0.1%%", s.mult)
		}
	}
	if !c.Counting() {
		t.Fatal("the Clock does not count 40ms after the jump")
	}
}

// wrong compares a prediction with the monotonic clock, also where the
// prediction does not fit in an int64.
func TestWrong(t *testing.T) {
	s := &state{tick0: 0, ns0: 0, mult: 1 << 32} // 1 ns a tick
	for _, tc := range []struct {
		tick uint64
		ns   int64
		want bool
	}{
		{1_000_000, 1_000_000, false},
		{1_000_000, 1_051_000, false}, // off 51µs; allowed 50µs + 1,051ns
		{1_000_000, 1_052_000, true},  // off 52µs; allowed 50µs + 1,052ns
		{1_000_000, 949_100, false},   // off 50.9µs; allowed 50µs + 949ns
		{1_000_000, 949_000, true},    // off 51µs; allowed 50µs + 949ns
		{^uint64(0) - 999, 0, true},   // a prediction of 2^64 − 1000 ns, which an int64 would read as −1000
		{1 << 63, 1 << 62, true},
	} {
		if got := wrong(s, sample{tick: tc.tick, ns: tc.ns, set: true}); got != tc.want {
			t.Errorf("wrong at tick %d, ns %d = %v, want %v", tc.tick, tc.ns, got, tc.want)
		}
	}
}

// extend predicts past the span, holds a counter behind the anchor at the
// anchor, and saturates rather than overflow.
func TestExtend(t *testing.T) {
	s := &state{tick0: 1_000, ns0: 5, mult: 1 << 32}
	for _, tc := range []struct {
		tick uint64
		want int64
	}{{2_000, 1_005}, {999, 5}, {0, 5}, {1_000 + 1<<40, 5 + 1<<40}, {^uint64(0), math.MaxInt64}} {
		if got := s.extend(tc.tick); got != tc.want {
			t.Errorf("extend(%d) = %d, want %d", tc.tick, got, tc.want)
		}
	}
}

// A Wall reads the wall time it was made at plus the monotonic time
// since: between two readings of time.Now around it, within 100µs; and in
// a synctest bubble, the bubble's fake time.
func TestAWallTellsUnixMicros(t *testing.T) {
	w := NewWall()
	for range 1000 {
		before := time.Now().UnixMicro()
		x := w.Micros()
		after := time.Now().UnixMicro()
		if x < before-100 || x > after+100 {
			t.Fatalf("Micros() = %d, not within 100µs of [%d, %d]", x, before, after)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		w := NewWall()
		start := time.Now()
		time.Sleep(90 * time.Minute)
		if got, want := w.Micros(), start.Add(90*time.Minute).UnixMicro(); got != want {
			t.Fatalf("in a bubble, after a fake 90 min sleep, Micros() = %d, want %d", got, want)
		}
	})
}
