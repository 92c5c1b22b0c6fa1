package adaptive

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/internal/ratelog"
)

// A Limiter is an adaptive concurrency limit (see the package doc). Create
// it with New; Acquire a Ticket for each request and Release it when the
// request is over. It is safe for concurrent use.
type Limiter struct {
	// The hot words: read or written by every Acquire.
	inflight atomic.Int64 // units in flight
	critical atomic.Int64 // round(L): what Critical requests may fill
	sheddble atomic.Int64 // ⌈s·round(L)⌉: what Sheddable requests may fill
	maxIn    atomic.Int64 // most units in flight in the current window
	shedWin  atomic.Int64 // requests shed in the current window
	shedAll  atomic.Int64 // requests shed since New
	estimate atomic.Int64 // the last window's mean latency, ns (RetryAfter)
	baseline atomic.Int64 // B, ns (Stats)

	config // the options, as New validated them
	log    *ratelog.Logger

	mu       sync.Mutex
	l        float64       // the limit L
	b        time.Duration // the no-load latency estimate B; 0: none yet
	start    time.Time     // the current window's start
	n        int           // its samples
	sum      time.Duration // their latencies
	inSum    int64         // the units in flight at their admission
	dropped  int           // its dropped requests
	shedding bool          // the last window shed (for the log)
	shedRun  int64         // requests shed since shedding started
}

// New returns a Limiter, or an error wrapping ErrInvalidOption, naming the
// option, for an option it cannot use (a nil function or clock, a limit
// below 1, a floor above the ceiling, a share outside [0, 1]).
func New(opts ...Option) (*Limiter, error) {
	c := config{
		alg: Gradient{}, initial: DefaultInitialLimit, min: DefaultMinLimit, max: DefaultMaxLimit,
		share: DefaultSheddableShare, minSamples: DefaultMinSamples, latencies: DefaultLatencies,
		minWin: DefaultMinWindow, maxWin: DefaultMaxWindow, clock: core.SystemClock(), name: DefaultName,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.err == nil && c.min > c.max {
		c.invalid("WithMinLimit", "floor %v above the ceiling %v", c.min, c.max)
	}
	if c.err != nil {
		return nil, c.err
	}
	l := &Limiter{config: c, log: ratelog.New(c.logger)}
	l.setLimit(min(max(c.initial, c.min), c.max))
	l.start = l.clock.Now()
	return l, nil
}

// Name returns the Limiter's name (WithName).
func (l *Limiter) Name() string { return l.name }

// setLimit sets L and the admission bounds that follow from it. l.mu is
// held, or l is not shared yet.
func (l *Limiter) setLimit(v float64) {
	l.l = v
	n := max(int64(math.Round(v)), 1)
	l.critical.Store(n)
	l.sheddble.Store(int64(math.Ceil(l.share * float64(n))))
}

// A Ticket is an admitted request's place in the limit, from Acquire to
// Release. The zero Ticket holds nothing: releasing it does nothing.
type Ticket struct {
	start time.Time
	in    int64 // units in flight at admission, this one included; 0: none held
}

// Held reports whether t holds a unit of the limit: Acquire admitted it.
func (t Ticket) Held() bool { return t.in > 0 }

// Acquire admits a request of priority p, if the units in flight allow
// (see the package doc), and returns its Ticket; otherwise it returns
// false, and the request is shed. It is O(1), and safe for concurrent
// use.
func (l *Limiter) Acquire(p Priority) (Ticket, bool) {
	bound := l.critical.Load()
	if p == Sheddable {
		bound = l.sheddble.Load()
	}
	for {
		n := l.inflight.Load()
		if n >= bound {
			l.shedWin.Add(1)
			l.shedAll.Add(1)
			return Ticket{}, false
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			n++
			for m := l.maxIn.Load(); n > m && !l.maxIn.CompareAndSwap(m, n); m = l.maxIn.Load() {
			}
			return Ticket{start: l.clock.Now(), in: n}, true
		}
	}
}

// An Outcome is how an admitted request ended, for Release.
type Outcome uint8

const (
	// Served: the handler returned; its latency is a sample.
	Served Outcome = iota
	// Dropped: the request was cancelled or gave up (its client
	// disconnected, its deadline passed, its handler panicked): its
	// latency says nothing of the service's and is not a sample.
	Dropped
)

// Release ends the request t admitted, with its outcome, and, at the end
// of a window, updates the limit. Release each Ticket once; releasing the
// zero Ticket does nothing. It is O(1), and safe for concurrent use.
func (l *Limiter) Release(t Ticket, o Outcome) {
	if t.in <= 0 {
		return
	}
	l.inflight.Add(-1)
	now := l.clock.Now()
	l.mu.Lock()
	if o == Served {
		l.n++
		l.sum += max(now.Sub(t.start), 0)
		l.inSum += t.in
	} else {
		l.dropped++
	}
	ev, ok := l.maybeUpdate(now)
	l.mu.Unlock()
	if ok {
		l.report(&ev)
	}
}

// windowEnd is what the end of a window reports, outside the lock.
type windowEnd struct {
	w               Window
	limit, inflight int64
	startShed       bool
	stopShed        bool
	shedRun         int64
}

// maybeUpdate ends the window at now if it is due, and updates B and L.
// l.mu is held.
func (l *Limiter) maybeUpdate(now time.Time) (windowEnd, bool) {
	elapsed := now.Sub(l.start)
	span := min(max(time.Duration(l.latencies*float64(l.b)), l.minWin), l.maxWin)
	if !(l.n >= l.minSamples && elapsed >= span) && !(elapsed >= l.maxWin) {
		return windowEnd{}, false
	}
	w := Window{
		Limit: l.l, Samples: l.n, Dropped: l.dropped, MaxInFlight: l.maxIn.Swap(l.inflight.Load()),
		Shed: l.shedWin.Swap(0), Duration: elapsed,
	}
	if l.n > 0 {
		w.Latency = l.sum / time.Duration(l.n)
		w.InFlight = float64(l.inSum) / float64(l.n)
		l.b = nextBaseline(l.b, w.Latency, w.InFlight, l.l, min(float64(l.n)/float64(l.minSamples), 1))
	}
	w.Baseline = l.b
	next := l.alg.Next(&w)
	if math.IsNaN(next) {
		next = l.l
	}
	l.setLimit(min(max(next, l.min), l.max))
	l.start, l.n, l.sum, l.inSum, l.dropped = now, 0, 0, 0, 0
	if w.Latency > 0 {
		l.estimate.Store(int64(w.Latency))
	}
	l.baseline.Store(int64(l.b))

	ev := windowEnd{w: w, limit: l.critical.Load(), inflight: l.inflight.Load()}
	switch {
	case w.Shed > 0 && !l.shedding:
		l.shedding, l.shedRun, ev.startShed = true, w.Shed, true
	case w.Shed > 0:
		l.shedRun += w.Shed
	case l.shedding:
		l.shedding, ev.stopShed, ev.shedRun = false, true, l.shedRun
	}
	return ev, true
}

// nextBaseline returns the no-load latency estimate after a window of
// mean latency m, at mean in-flight in under limit lim, from b (0: none):
// fast down, up only while concurrency was low (see the package doc). A
// window of fewer samples than a full one (it ended at the longest window,
// under light traffic) moves b by weight w < 1 of the full step: a mean
// of a few samples is noisy, and one lucky sample must not drag b down.
func nextBaseline(b, m time.Duration, in, lim, w float64) time.Duration {
	switch {
	case b == 0:
		return m
	case m < b:
		return b + time.Duration(w*float64(m-b)/2)
	case in <= lim/2:
		return b + time.Duration(w*float64(m-b)/10)
	}
	return b
}

// report hands a window's end to the observers and the log.
func (l *Limiter) report(ev *windowEnd) {
	ctx := context.Background()
	if l.obs != nil {
		l.obs.ObserveEvent(ctx, &core.Event{
			Kind: core.EventAdaptive, Limiter: l.name, Count: ev.w.Shed,
			Limit: ev.limit, InFlight: ev.inflight, Latency: ev.w.Baseline,
		})
	}
	switch {
	case ev.startShed && l.log.Enabled(ctx, slog.LevelWarn):
		l.log.Log(ctx, "shed "+l.name, ev.w.Shed, slog.LevelWarn,
			"tollgate: adaptive limit shedding requests: latency grew past its tolerance",
			slog.String("limiter", l.name), slog.Int64("limit", ev.limit),
			slog.Duration("latency", ev.w.Latency), slog.Duration("no_load_latency", ev.w.Baseline))
	case ev.stopShed && l.log.Enabled(ctx, slog.LevelInfo):
		l.log.Log(ctx, "unshed "+l.name, 1, slog.LevelInfo,
			"tollgate: adaptive limit stopped shedding",
			slog.String("limiter", l.name), slog.Int64("limit", ev.limit), slog.Int64("shed", ev.shedRun))
	}
}

// RetryAfter returns when capacity is likely back for a request shed now:
// the latency of the last window (the time for the requests in flight to
// turn over), or the no-load estimate when it is longer; WithWindow's
// minimum before any window ended.
func (l *Limiter) RetryAfter() time.Duration {
	return time.Duration(max(l.estimate.Load(), l.baseline.Load(), int64(l.minWin)))
}

// Stats is a Limiter's state at one instant.
type Stats struct {
	Limit    int64         // the limit for Critical requests
	InFlight int64         // units in flight
	Baseline time.Duration // the no-load latency estimate B; 0 before the first window
	Latency  time.Duration // the mean latency of the last window
	Shed     int64         // requests shed since New
}

// Stats returns the Limiter's state. It is safe for concurrent use.
func (l *Limiter) Stats() Stats {
	return Stats{
		Limit: l.critical.Load(), InFlight: l.inflight.Load(), Baseline: time.Duration(l.baseline.Load()),
		Latency: time.Duration(l.estimate.Load()), Shed: l.shedAll.Load(),
	}
}

// String describes the Limiter for logs.
func (l *Limiter) String() string {
	s := l.Stats()
	return fmt.Sprintf("adaptive %q: limit %d, in flight %d, no-load latency %v", l.name, s.Limit, s.InFlight, s.Baseline)
}
