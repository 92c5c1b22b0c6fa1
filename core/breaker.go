package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/core/engine"
)

// Breaker configures the circuit breaker of a Limiter whose store is not
// InProcess (WithBreaker). The breaker tells a store that is slow from one
// that is down: a slow call costs only itself (it times out, and the
// failure policy answers it), while evidence of an outage opens the
// breaker, so that the store is skipped, every call answered by the
// failure policy at once, until a probe finds it back. The zero value of
// a field means its default.
//
// The breaker opens when any of these holds:
//
//   - a call finds the store refusing connections (connection refused, host
//     or network unreachable): nothing is listening, no wait will help;
//   - Consecutive calls in a row have failed, and the first of them started
//     at least MinOutage ago: a stall shorter than MinOutage (a failover, a
//     fork for a snapshot, a pause of the garbage collector) fails the calls
//     caught in it and no more;
//   - over the last Window, at least MinCalls calls were made and at least
//     FailureRate of them failed: a store failing every other call is down
//     for half the traffic, though it never fails twice in a row.
//
// Open, it skips the store for CoolDown, then lets one call through to
// probe it (the others still skip it): the probe's success closes the
// breaker, its failure opens it for another CoolDown. So a store that comes
// back is used again within one CoolDown.
//
// The defaults suit a store answering in about a millisecond with the
// default timeout: a healthy store never opens the breaker, however loaded
// (a call that times out is one failure among thousands, and its successors
// succeed); a stall of tens of milliseconds costs the calls caught in it
// (at most one timeout each) and nothing more; a store that hangs is
// skipped within MinOutage (3 timeouts, 300 ms), one that refuses
// connections at the first refusal.
type Breaker struct {
	// Consecutive is the run of consecutive failures that opens the
	// breaker once the run has lasted MinOutage. Default: 5.
	Consecutive int
	// MinOutage is how long a run of consecutive failures must last, from
	// the start of its first call, before it opens the breaker. Default:
	// three times the Limiter's timeout (WithTimeout).
	MinOutage time.Duration
	// Window is the span over which the failure rate is measured, in ten
	// slices that age out one by one. Default: 10s.
	Window time.Duration
	// MinCalls is the fewest calls within Window for the failure rate to
	// open the breaker. Default: 20.
	MinCalls int
	// FailureRate is the fraction of failed calls within Window, at least
	// MinCalls of them, that opens the breaker; at most 1. Default: 0.5.
	FailureRate float64
	// CoolDown is how long an open breaker skips the store before one call
	// probes it: a store that comes back is used again within it. Probes
	// are single calls, so a short cool-down costs a dead store little.
	// Default: 250ms.
	CoolDown time.Duration
	// Disabled turns the breaker off: every call goes to the store, and
	// each failure is answered by the failure policy on its own.
	// Default: false.
	Disabled bool
}

// Defaults of the Breaker's fields.
const (
	DefaultBreakerConsecutive = 5
	DefaultBreakerWindow      = 10 * time.Second
	DefaultBreakerMinCalls    = 20
	DefaultBreakerFailureRate = 0.5
	DefaultBreakerCoolDown    = 250 * time.Millisecond
)

// WithBreaker configures the circuit breaker (see Breaker); zero fields
// keep their defaults, negative ones or a FailureRate above 1 are an
// error. Default: Breaker{}, every field at its default.
func WithBreaker(b Breaker) Option {
	return optionFunc(func(l *Limiter) error {
		switch {
		case b.Consecutive < 0, b.MinOutage < 0, b.Window < 0, b.MinCalls < 0, b.CoolDown < 0:
			return fmt.Errorf("%w: WithBreaker: negative setting in %+v", ErrInvalidOption, b)
		case b.FailureRate < 0 || b.FailureRate > 1 || math.IsNaN(b.FailureRate):
			return fmt.Errorf("%w: WithBreaker: failure rate %v is not within [0, 1]", ErrInvalidOption, b.FailureRate)
		}
		l.breakerConf = b
		return nil
	})
}

// BreakerState is the state of a circuit breaker.
type BreakerState uint8

const (
	// BreakerClosed: calls go to the store.
	BreakerClosed BreakerState = iota
	// BreakerOpen: calls skip the store, answered by the failure policy.
	BreakerOpen
	// BreakerHalfOpen: one call probes the store; the others skip it.
	BreakerHalfOpen
)

var breakerStateNames = [...]string{"closed", "open", "half-open"}

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	if int(s) < len(breakerStateNames) {
		return breakerStateNames[s]
	}
	return fmt.Sprintf("BreakerState(%d)", s)
}

// errOpen is the failure of a call skipped by the open breaker.
var errOpen = fmt.Errorf("%w: circuit breaker open after store failures", ErrUnavailable)

// breaker is the state machine of Breaker. Times are nanoseconds of the
// monotonic clock since base (never 0).
//
// The hot path, a call to a closed breaker that succeeds, reads the state,
// and adds to the current slice of the window and, only after failures,
// clears the run: atomic operations, no lock. Failures and transitions take
// mu.
type breaker struct {
	conf     Breaker // defaults filled in
	slice    int64   // ns per slice of the window
	base     time.Time
	onChange func(ctx context.Context, from, to BreakerState, cause error) // nil: nobody listens

	state     atomic.Uint32         // BreakerState
	cause     atomic.Pointer[error] // the last failure's error: what calls skipped while open log as
	openUntil atomic.Int64          // while open or half-open: when the next probe may start
	run       atomic.Int64          // consecutive failures
	slices    [10]windowSlice

	mu       sync.Mutex
	runStart int64 // start of the first call of the current run
}

// windowSlice counts the calls and failures of one tenth of the window.
type windowSlice struct {
	id           atomic.Int64 // which slice of time it counts: now/slice
	calls, fails atomic.Int64
}

// newBreaker returns the breaker of conf, whose MinOutage defaults to three
// timeouts.
func newBreaker(conf Breaker, timeout time.Duration, onChange func(ctx context.Context, from, to BreakerState, cause error)) *breaker {
	if conf.Consecutive == 0 {
		conf.Consecutive = DefaultBreakerConsecutive
	}
	if conf.MinOutage == 0 {
		conf.MinOutage = 3 * timeout
	}
	if conf.Window == 0 {
		conf.Window = DefaultBreakerWindow
	}
	if conf.MinCalls == 0 {
		conf.MinCalls = DefaultBreakerMinCalls
	}
	if conf.FailureRate == 0 {
		conf.FailureRate = DefaultBreakerFailureRate
	}
	if conf.CoolDown == 0 {
		conf.CoolDown = DefaultBreakerCoolDown
	}
	b := &breaker{conf: conf, slice: max(int64(conf.Window/10), 1), base: time.Now(), onChange: onChange}
	for i := range b.slices {
		b.slices[i].id.Store(-1)
	}
	return b
}

func (b *breaker) now() int64 { return int64(time.Since(b.base)) + 1 }

// allow reports whether a call may go to the store: the breaker is closed,
// or this call is the probe of an open one. ctx is the call's, for
// onChange.
func (b *breaker) allow(ctx context.Context, now int64) bool {
	if BreakerState(b.state.Load()) == BreakerClosed {
		return true
	}
	u := b.openUntil.Load()
	if now < u || !b.openUntil.CompareAndSwap(u, now+int64(b.conf.CoolDown)) {
		return false
	}
	// This call probes. If it never reports (a panic), another probe goes
	// a cool-down later.
	if b.state.CompareAndSwap(uint32(BreakerOpen), uint32(BreakerHalfOpen)) {
		b.changed(ctx, BreakerOpen, BreakerHalfOpen, nil)
	}
	return true
}

// success records a call that the store answered.
func (b *breaker) success(ctx context.Context, now int64) {
	b.count(now, false)
	if b.run.Load() != 0 {
		b.run.Store(0)
	}
	if BreakerState(b.state.Load()) != BreakerClosed {
		b.mu.Lock()
		from := BreakerState(b.state.Load())
		if from != BreakerClosed {
			b.reset()
			b.state.Store(uint32(BreakerClosed))
		}
		b.mu.Unlock()
		if from != BreakerClosed {
			b.changed(ctx, from, BreakerClosed, nil)
		}
	}
}

// failure records a call, started at start, that failed with err.
func (b *breaker) failure(ctx context.Context, start, now int64, err error) {
	b.count(now, true)
	b.cause.Store(&err)
	b.mu.Lock()
	from := BreakerState(b.state.Load())
	open := false
	switch {
	case from != BreakerClosed: // a probe failed, or a call made before the breaker opened
		if from == BreakerHalfOpen {
			b.state.Store(uint32(BreakerOpen))
			b.openUntil.Store(now + int64(b.conf.CoolDown))
		}
	case refused(err):
		open = true
	default:
		run := b.run.Add(1)
		if run == 1 || start < b.runStart {
			b.runStart = start
		}
		open = run >= int64(b.conf.Consecutive) && now-b.runStart >= int64(b.conf.MinOutage) ||
			b.rateExceeded(now)
	}
	if open {
		b.state.Store(uint32(BreakerOpen))
		b.openUntil.Store(now + int64(b.conf.CoolDown))
	}
	b.mu.Unlock()
	switch {
	case open:
		b.changed(ctx, BreakerClosed, BreakerOpen, err)
	case from == BreakerHalfOpen:
		b.changed(ctx, BreakerHalfOpen, BreakerOpen, err)
	}
}

// lastCause returns the error of the last failure: for a call the open
// breaker skips, the cause that the failure policy answers it for.
func (b *breaker) lastCause() error {
	if e := b.cause.Load(); e != nil {
		return *e
	}
	return nil
}

// count adds a call to the current slice of the window. A slice whose time
// has passed is recycled by the first call that finds it stale; calls
// racing with the recycling may be lost, which only blurs the rate.
func (b *breaker) count(now int64, failed bool) {
	id := now / b.slice
	s := &b.slices[id%int64(len(b.slices))]
	if old := s.id.Load(); old != id && s.id.CompareAndSwap(old, id) {
		s.calls.Store(0)
		s.fails.Store(0)
	}
	s.calls.Add(1)
	if failed {
		s.fails.Add(1)
	}
}

// rateExceeded reports whether the failures within the window reach the
// failure rate over at least MinCalls calls.
func (b *breaker) rateExceeded(now int64) bool {
	id := now / b.slice
	var calls, fails int64
	for i := range b.slices {
		s := &b.slices[i]
		if sid := s.id.Load(); sid > id-int64(len(b.slices)) && sid <= id {
			calls += s.calls.Load()
			fails += s.fails.Load()
		}
	}
	return calls >= int64(b.conf.MinCalls) && float64(fails) >= b.conf.FailureRate*float64(calls)
}

// reset forgets the window and the run: the store is back. b.mu is held.
func (b *breaker) reset() {
	b.run.Store(0)
	for i := range b.slices {
		b.slices[i].id.Store(-1)
		b.slices[i].calls.Store(0)
		b.slices[i].fails.Store(0)
	}
}

func (b *breaker) changed(ctx context.Context, from, to BreakerState, cause error) {
	if b.onChange != nil {
		b.onChange(ctx, from, to, cause)
	}
}

// refused reports whether err shows that nothing listens at the store's
// address: the breaker opens at once.
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH)
}

// A Partitioned store keeps its keys in parts that fail independently, such
// as the masters of a Redis Cluster. A Limiter keeps a circuit breaker per
// part, so that a part that fails costs only the keys it holds: calls for
// the other parts go on as usual.
type Partitioned interface {
	// Part returns the name of the part that holds key in scope (a node's
	// address, say), or "" when it cannot tell. It must be quick and safe
	// for concurrent use. A key's part may change (a failover moves keys to
	// another node, whose breaker starts closed). A Limiter keeps the
	// breakers of at most 1024 parts; further parts share the breaker of
	// part "".
	Part(scope, key string) string
}

// breakers holds the breakers of a Limiter: one, or one per part of a
// Partitioned store.
type breakers struct {
	conf     Breaker
	timeout  time.Duration
	onChange func(ctx context.Context, part string, from, to BreakerState, cause error)
	parts    Partitioned // nil: one breaker
	whole    *breaker    // the breaker of part "" (all of a store that is not Partitioned)

	mu     sync.Mutex
	byPart atomic.Pointer[map[string]*breaker] // copied on write: parts are few and stable
}

func newBreakers(conf Breaker, timeout time.Duration, store Store, onChange func(ctx context.Context, part string, from, to BreakerState, cause error)) *breakers {
	bs := &breakers{conf: conf, timeout: timeout, onChange: onChange}
	bs.parts, _ = store.(Partitioned)
	bs.whole = bs.make("")
	return bs
}

func (bs *breakers) make(part string) *breaker {
	var fn func(ctx context.Context, from, to BreakerState, cause error)
	if bs.onChange != nil {
		fn = func(ctx context.Context, from, to BreakerState, cause error) { bs.onChange(ctx, part, from, to, cause) }
	}
	return newBreaker(bs.conf, bs.timeout, fn)
}

// maxParts bounds the breakers kept per Limiter: past it, parts share the
// breaker of the whole store.
const maxParts = 1024

// of returns the breaker of the part holding op's key.
func (bs *breakers) of(op *engine.Op) *breaker {
	if bs.parts == nil {
		return bs.whole
	}
	part := bs.parts.Part(op.Plan.Scope, op.Key)
	if part == "" {
		return bs.whole
	}
	if m := bs.byPart.Load(); m != nil {
		if b, ok := (*m)[part]; ok {
			return b
		}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	old := bs.byPart.Load()
	if old != nil {
		if b, ok := (*old)[part]; ok {
			return b
		}
		if len(*old) >= maxParts {
			return bs.whole
		}
	}
	m := make(map[string]*breaker, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	b := bs.make(part)
	m[part] = b
	bs.byPart.Store(&m)
	return b
}
