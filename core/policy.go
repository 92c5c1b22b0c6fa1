package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Defaults of the failure options.
const (
	// DefaultTimeout bounds each store call of a Limiter whose store is not
	// InProcess.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultBreakerFailures is how many consecutive store failures open
	// the circuit breaker (a timeout opens it at once).
	DefaultBreakerFailures = 5
	// DefaultBreakerCoolDown is how long an open breaker skips the store
	// before it lets one call through to probe it.
	DefaultBreakerCoolDown = time.Second
)

// InProcess is implemented by stores that keep their state in the process
// and never block on I/O, such as memstore. A Limiter calls them directly:
// no timeout (context.WithTimeout allocates, and they would never reach
// it) and no circuit breaker.
type InProcess interface {
	InProcess()
}

// A FailurePolicy says what a Limiter does when its store fails: returns an
// error, returns an error timeouts or is skipped by the open circuit
// breaker. Invalid input (errors wrapping ErrInvalidLimit, ErrInvalidCost,
// ErrInvalidKey or ErrInvalidOp), ErrClosed and the caller's own cancelled
// context are not failures: they are returned as they are. The zero value
// is FailClosed.
type FailurePolicy struct {
	mode     uint8
	fallback Store
}

const (
	failClosed uint8 = iota
	failOpen
	failFallback
)

var (
	// FailClosed denies: the operation returns an error wrapping
	// ErrUnavailable and the store's error. Adapters answer 503.
	FailClosed = FailurePolicy{mode: failClosed}
	// FailOpen admits: the operation returns a Decision with Allowed true
	// and Source FromFailOpen, and no error, so traffic flows unlimited
	// while the store is down.
	FailOpen = FailurePolicy{mode: failOpen}
)

// Fallback decides on store instead, with the same operation and limits:
// typically a memstore, so that each instance limits on its own while the
// shared store is down (a fleet of n instances then admits up to n times
// the quota; give the fallback Limiter-independent headroom accordingly).
// If store fails too, the operation returns an error wrapping
// ErrUnavailable. A nil store means FailClosed.
func Fallback(store Store) FailurePolicy {
	if store == nil {
		return FailClosed
	}
	return FailurePolicy{mode: failFallback, fallback: store}
}

// WithTimeout bounds every store call by d (a context deadline), unless
// the store is InProcess. A call that times out is a failure and opens the
// circuit breaker at once. d ≤ 0 means no timeout. Default: DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(l *Limiter) error {
		l.timeout = max(d, 0)
		return nil
	})
}

// WithFailurePolicy sets what happens when the store fails: FailOpen,
// FailClosed or Fallback(store). Default: FailClosed.
func WithFailurePolicy(p FailurePolicy) Option {
	return optionFunc(func(l *Limiter) error {
		l.policy = p
		return nil
	})
}

// WithErrorHook makes the Limiter call fn with every store failure, before
// the failure policy applies, from the goroutine of the operation; while
// the circuit breaker is open, fn receives an error wrapping
// ErrUnavailable for every skipped call. fn must be safe for concurrent
// use and quick (count, sample, log). Default: none.
func WithErrorHook(fn func(ctx context.Context, key string, err error)) Option {
	return optionFunc(func(l *Limiter) error {
		l.hook = fn
		return nil
	})
}

// WithBreaker configures the circuit breaker: after failures consecutive
// store failures, or one timeout, the store is skipped (each call fails at
// once, under the failure policy) for coolDown; then one call probes it,
// and a success closes the breaker while a failure opens it for another
// coolDown. failures ≤ 0 or coolDown ≤ 0 turns the breaker off. Default:
// DefaultBreakerFailures and DefaultBreakerCoolDown.
func WithBreaker(failures int, coolDown time.Duration) Option {
	return optionFunc(func(l *Limiter) error {
		if failures <= 0 || coolDown <= 0 {
			failures, coolDown = 0, 0
		}
		l.breaker.threshold = int32(min(failures, 1<<30))
		l.breaker.coolDown = int64(coolDown)
		return nil
	})
}

// errOpen is the failure of a call skipped by the open breaker.
var errOpen = fmt.Errorf("%w: circuit breaker open after store failures", ErrUnavailable)

// breaker is a circuit breaker in two atomic words. openUntil is 0 while
// closed; while open, the monotonic time (ns since base) until which calls
// are skipped. The first call after it claims the probe by moving openUntil
// a cool-down further, so the others keep skipping until the probe reports.
type breaker struct {
	threshold int32 // 0: off
	coolDown  int64 // ns
	base      time.Time
	fails     atomic.Int32
	openUntil atomic.Int64
}

func (b *breaker) now() int64 { return int64(time.Since(b.base)) + 1 }

// allow reports whether a call may go to the store.
func (b *breaker) allow() bool {
	u := b.openUntil.Load()
	if u == 0 {
		return true
	}
	now := b.now()
	return now >= u && b.openUntil.CompareAndSwap(u, now+b.coolDown)
}

func (b *breaker) success() {
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if b.openUntil.Load() != 0 {
		b.openUntil.Store(0)
	}
}

func (b *breaker) failure(timeout bool) {
	if b.threshold == 0 {
		return
	}
	if timeout || b.fails.Add(1) >= b.threshold {
		b.fails.Store(0)
		b.openUntil.Store(b.now() + b.coolDown)
	}
}

// isFailure reports whether err, returned by a store for a call under ctx
// (the caller's context), is a store failure rather than invalid input,
// a closed store or a caller that gave up.
func isFailure(ctx context.Context, err error) bool {
	switch {
	case errors.Is(err, ErrInvalidLimit), errors.Is(err, ErrInvalidCost), errors.Is(err, ErrInvalidKey),
		errors.Is(err, ErrInvalidOp), errors.Is(err, ErrClosed):
		return false
	}
	return ctx.Err() == nil
}

// isTimeout reports whether err is a deadline or an I/O timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// remote applies op on a store that is not InProcess: through the breaker,
// under the timeout, with the failure policy.
func (l *Limiter) remote(ctx context.Context, op *Op) (Decision, error) {
	if l.breaker.threshold > 0 && !l.breaker.allow() {
		return l.fail(ctx, op, errOpen)
	}
	cctx, cancel := ctx, context.CancelFunc(nil)
	if l.timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, l.timeout)
	}
	d, err := l.store.Apply(cctx, *op)
	timedOut := err != nil && (cctx.Err() != nil || isTimeout(err))
	if cancel != nil {
		cancel()
	}
	switch {
	case err == nil:
		if l.breaker.threshold > 0 {
			l.breaker.success()
		}
		return d, nil
	case !isFailure(ctx, err):
		return d, err
	}
	l.breaker.failure(timedOut)
	return l.fail(ctx, op, err)
}

// fail reports err to the hook and applies the failure policy.
func (l *Limiter) fail(ctx context.Context, op *Op, err error) (Decision, error) {
	if l.hook != nil {
		l.hook(ctx, op.Key, err)
	}
	switch l.policy.mode {
	case failOpen:
		d := Decision{Allowed: true, Cost: op.Cost, Source: FromFailOpen}
		if len(op.Limits) > 0 {
			d.Limit = op.Limits[0]
		}
		return d, nil
	case failFallback:
		fb := l.policy.fallback
		cctx, cancel := ctx, context.CancelFunc(nil)
		if _, ok := fb.(InProcess); !ok && l.timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, l.timeout)
		}
		d, ferr := fb.Apply(cctx, *op)
		if cancel != nil {
			cancel()
		}
		if ferr == nil {
			d.Source = FromFallback
			return d, nil
		}
		if !isFailure(ctx, ferr) {
			return d, ferr
		}
		if l.hook != nil {
			l.hook(ctx, op.Key, ferr)
		}
		return Decision{}, fmt.Errorf("%w: %w; fallback: %w", ErrUnavailable, err, ferr)
	}
	if err == errOpen {
		return Decision{}, err
	}
	return Decision{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
}
