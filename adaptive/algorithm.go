package adaptive

import (
	"fmt"
	"math"
	"time"
)

// An Algorithm computes the next limit at the end of each window of
// samples. Next must be a pure function of w: the Limiter clamps its
// result to [WithMinLimit, WithMaxLimit] and calls it under its lock, one
// window at a time. Gradient and AIMD are the algorithms of this package.
type Algorithm interface {
	Next(w *Window) float64
}

// A Window is what the Limiter saw between two updates of its limit.
type Window struct {
	// Limit is the limit during the window.
	Limit float64
	// Baseline is the no-load latency estimate B, updated with this
	// window (see the package doc).
	Baseline time.Duration
	// Latency is the mean latency m of the window's samples.
	Latency time.Duration
	// Samples is the number of requests released with their latency.
	Samples int
	// Dropped is the number of requests released as Dropped (cancelled,
	// timed out): not samples.
	Dropped int
	// InFlight is the mean number of units in flight when the window's
	// samples were admitted, themselves included.
	InFlight float64
	// MaxInFlight is the most units in flight at once in the window.
	MaxInFlight int64
	// Shed is the number of requests refused in the window, of any
	// priority.
	Shed int64
	// Duration is the window's length.
	Duration time.Duration
}

// Binding reports whether the limit held requests back in w: a request
// was shed, or the units in flight reached the limit less one. Only a
// binding limit grows: growing one that nothing pushes against would let
// it climb without end under light load.
func (w *Window) Binding() bool {
	return w.Shed > 0 || float64(w.MaxInFlight) >= w.Limit-1
}

// Representative reports whether w's samples speak for its requests: at
// least as many were served as dropped. When most requests are dropped
// (timeouts), the few served are the fastest, whose latency flatters the
// service: a limit never grows on them (concurrency-limits #137: steady
// timeouts pushing the limit to its maximum).
func (w *Window) Representative() bool { return w.Samples >= w.Dropped }

// Gradient is the default Algorithm: it moves the limit by the gradient
// g = Tolerance·B/m of the no-load latency B to the window's mean m,
// within [½, Tolerance]:
//
//	g < 1:  L ← L − Smoothing·(1 − g)·L
//	g ≥ 1:  L ← L + min((g − 1)·L, √L), only when the limit is binding
//	        and the window Representative
//
// It settles where the mean latency is Tolerance·B. The zero value is the
// default: Tolerance 1.5, Smoothing 0.5.
type Gradient struct {
	// Tolerance is how far above the no-load latency the mean latency
	// may rise: 1.5 lets requests wait about half a no-load latency in
	// the service's queue, which keeps it busy. Above 1; default 1.5.
	Tolerance float64
	// Smoothing is the share of the gradient's drop applied per window:
	// with g at its floor ½, the limit falls by Smoothing/2. In (0, 1];
	// default 0.5, so at most −25% per window.
	Smoothing float64
}

// Gradient defaults.
const (
	DefaultTolerance = 1.5
	DefaultSmoothing = 0.5
)

func (a Gradient) params() (tol, smooth float64) {
	tol, smooth = a.Tolerance, a.Smoothing
	if tol == 0 {
		tol = DefaultTolerance
	}
	if smooth == 0 {
		smooth = DefaultSmoothing
	}
	return tol, smooth
}

func (a Gradient) validate() error {
	tol, smooth := a.params()
	switch {
	case !(tol > 1) || math.IsInf(tol, 0):
		return fmt.Errorf("Gradient.Tolerance %v: want above 1", a.Tolerance)
	case !(smooth > 0 && smooth <= 1):
		return fmt.Errorf("Gradient.Smoothing %v: want in (0, 1]", a.Smoothing)
	}
	return nil
}

// Next implements Algorithm.
func (a Gradient) Next(w *Window) float64 {
	if w.Samples == 0 || w.Latency <= 0 {
		return w.Limit // nothing measured: nothing learned
	}
	tol, smooth := a.params()
	g := tol * float64(w.Baseline) / float64(w.Latency)
	g = min(max(g, 0.5), tol)
	l := w.Limit
	if g < 1 {
		return l - smooth*(1-g)*l
	}
	if !w.Binding() || !w.Representative() {
		return l
	}
	return l + min((g-1)*l, math.Sqrt(l))
}

// AIMD is the additive-increase, multiplicative-decrease Algorithm:
//
//	m > Threshold:  L ← Backoff·L
//	otherwise:      L ← L + Increase, only when the limit is binding and
//	                the window Representative
//
// The zero value is the default: Threshold 2·B, Backoff 0.9, Increase 1.
type AIMD struct {
	// Threshold is the mean latency above which the limit backs off; 0
	// for twice the no-load latency estimate B.
	Threshold time.Duration
	// Backoff multiplies the limit when it backs off. In (0, 1); default
	// 0.9.
	Backoff float64
	// Increase is added to a binding limit otherwise. Above 0; default 1.
	Increase float64
}

func (a AIMD) params(b time.Duration) (th time.Duration, backoff, inc float64) {
	th, backoff, inc = a.Threshold, a.Backoff, a.Increase
	if th == 0 {
		th = 2 * b
	}
	if backoff == 0 {
		backoff = 0.9
	}
	if inc == 0 {
		inc = 1
	}
	return th, backoff, inc
}

func (a AIMD) validate() error {
	_, backoff, inc := a.params(0)
	switch {
	case a.Threshold < 0:
		return fmt.Errorf("AIMD.Threshold %v: want 0 or more", a.Threshold)
	case !(backoff > 0 && backoff < 1):
		return fmt.Errorf("AIMD.Backoff %v: want in (0, 1)", a.Backoff)
	case !(inc > 0) || math.IsInf(inc, 0):
		return fmt.Errorf("AIMD.Increase %v: want above 0", a.Increase)
	}
	return nil
}

// Next implements Algorithm.
func (a AIMD) Next(w *Window) float64 {
	if w.Samples == 0 {
		return w.Limit
	}
	th, backoff, inc := a.params(w.Baseline)
	switch {
	case w.Latency > th:
		return w.Limit * backoff
	case w.Binding() && w.Representative():
		return w.Limit + inc
	}
	return w.Limit
}
