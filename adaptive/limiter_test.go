package adaptive_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
)

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  adaptive.Option
		want string
	}{
		{"a nil algorithm", adaptive.WithAlgorithm(nil), "WithAlgorithm: nil algorithm"},
		{"a tolerance of 1", adaptive.WithAlgorithm(adaptive.Gradient{Tolerance: 1}), "Tolerance"},
		{"a smoothing above 1", adaptive.WithAlgorithm(adaptive.Gradient{Smoothing: 2}), "Smoothing"},
		{"a backoff of 1", adaptive.WithAlgorithm(adaptive.AIMD{Backoff: 1}), "Backoff"},
		{"a negative increase", adaptive.WithAlgorithm(adaptive.AIMD{Increase: -1}), "Increase"},
		{"a negative threshold", adaptive.WithAlgorithm(adaptive.AIMD{Threshold: -1}), "Threshold"},
		{"an initial limit of 0", adaptive.WithInitialLimit(0), "WithInitialLimit"},
		{"a floor of 0", adaptive.WithMinLimit(0), "WithMinLimit"},
		{"a ceiling of 0", adaptive.WithMaxLimit(0), "WithMaxLimit"},
		{"a share above 1", adaptive.WithSheddableShare(1.5), "WithSheddableShare"},
		{"a NaN share", adaptive.WithSheddableShare(math.NaN()), "WithSheddableShare"},
		{"no samples per window", adaptive.WithWindow(0, 10, time.Millisecond, time.Second), "WithWindow"},
		{"a window whose min exceeds its max", adaptive.WithWindow(1, 10, time.Second, time.Millisecond), "WithWindow"},
		{"a nil clock", adaptive.WithClock(nil), "WithClock"},
		{"an empty name", adaptive.WithName(""), "WithName"},
		{"a nil observer", adaptive.WithObserver(nil), "WithObserver"},
		{"a nil logger", adaptive.WithLogger(nil), "WithLogger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adaptive.New(tt.opt)
			if !errors.Is(err, adaptive.ErrInvalidOption) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New(%s) = %v, want an ErrInvalidOption naming %s", tt.name, err, tt.want)
			}
		})
	}
	if _, err := adaptive.New(adaptive.WithMinLimit(10), adaptive.WithMaxLimit(5)); !errors.Is(err, adaptive.ErrInvalidOption) {
		t.Errorf("New with a floor above the ceiling = %v, want ErrInvalidOption", err)
	}
}

func TestAcquireRefusesSheddableFirst(t *testing.T) {
	lim := newLimiter(t, newClock(), adaptive.WithInitialLimit(10), adaptive.WithSheddableShare(0.5))
	var held []adaptive.Ticket
	for i := range 5 {
		tk, ok := lim.Acquire(adaptive.Sheddable)
		if !ok {
			t.Fatalf("Acquire(Sheddable) #%d = false with %d in flight, want true below 5", i+1, i)
		}
		held = append(held, tk)
	}
	if _, ok := lim.Acquire(adaptive.Sheddable); ok {
		t.Fatal("Acquire(Sheddable) = true with 5 of 10 in flight, want false at the share")
	}
	for i := 5; i < 10; i++ {
		tk, ok := lim.Acquire(adaptive.Critical)
		if !ok {
			t.Fatalf("Acquire(Critical) = false with %d of 10 in flight, want true", i)
		}
		held = append(held, tk)
	}
	if _, ok := lim.Acquire(adaptive.Critical); ok {
		t.Fatal("Acquire(Critical) = true with 10 of 10 in flight, want false")
	}
	if got := lim.Stats(); got.InFlight != 10 || got.Shed != 2 {
		t.Fatalf("Stats() = %+v, want 10 in flight and 2 shed", got)
	}
	lim.Release(adaptive.Ticket{}, adaptive.Served) // holds nothing
	for _, tk := range held {
		lim.Release(tk, adaptive.Dropped)
	}
	if got := lim.Stats().InFlight; got != 0 {
		t.Fatalf("InFlight = %d after every release, want 0", got)
	}
}

func TestGradientNext(t *testing.T) {
	const b = 20 * time.Millisecond
	tests := []nextCase{
		{"a binding limit at no-load latency grows by √L at most",
			adaptive.Window{Limit: 100, Baseline: b, Latency: b, Samples: 50, Shed: 1}, 110},
		{"a small binding limit grows by (g−1)·L",
			adaptive.Window{Limit: 4, Baseline: b, Latency: b * 5 / 4, Samples: 50, Shed: 1}, 4.8},
		{"a limit nothing pushes against stays",
			adaptive.Window{Limit: 100, Baseline: b, Latency: b, Samples: 50, MaxInFlight: 40}, 100},
		{"a window of timeouts does not grow it",
			adaptive.Window{Limit: 100, Baseline: b, Latency: b, Samples: 5, Dropped: 50, Shed: 9}, 100},
		{"latency at the tolerance holds it",
			adaptive.Window{Limit: 100, Baseline: b, Latency: b * 3 / 2, Samples: 50, Shed: 9}, 100},
		{"twice the tolerance drops it by an eighth",
			adaptive.Window{Limit: 100, Baseline: b, Latency: 3 * b, Samples: 50, Shed: 9}, 75},
		{"any latency drops it by a quarter at most",
			adaptive.Window{Limit: 100, Baseline: b, Latency: 100 * b, Samples: 50, Shed: 9}, 75},
		{"no samples, no change",
			adaptive.Window{Limit: 100, Baseline: b, Dropped: 50, Shed: 9}, 100},
	}
	checkNext(t, adaptive.Gradient{}, tests)
}

func TestAIMDNext(t *testing.T) {
	const b = 20 * time.Millisecond
	tests := []nextCase{
		{"a binding limit within the threshold grows by one",
			adaptive.Window{Limit: 10, Baseline: b, Latency: b, Samples: 50, Shed: 1}, 11},
		{"a latency above twice the no-load one backs off",
			adaptive.Window{Limit: 10, Baseline: b, Latency: 2*b + 1, Samples: 50, Shed: 1}, 9},
		{"a limit nothing pushes against stays",
			adaptive.Window{Limit: 10, Baseline: b, Latency: b, Samples: 50, MaxInFlight: 3}, 10},
		{"a window of timeouts does not grow it",
			adaptive.Window{Limit: 10, Baseline: b, Latency: b, Samples: 1, Dropped: 9, Shed: 1}, 10},
	}
	checkNext(t, adaptive.AIMD{}, tests)
}

// checkNext checks alg's Next on each window of tests.
func checkNext(t *testing.T, alg adaptive.Algorithm, tests []nextCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := alg.Next(&tt.w); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Next(%+v) = %v, want %v", tt.w, got, tt.want)
			}
		})
	}
}

// nextCase is a window and the limit an algorithm should make of it.
type nextCase struct {
	name string
	w    adaptive.Window
	want float64
}

// recorder keeps the events an Observer sees.
type recorder struct{ events []core.Event }

func (r *recorder) ObserveDecision(context.Context, *core.Observation) {}
func (r *recorder) ObserveEvent(_ context.Context, e *core.Event)      { r.events = append(r.events, *e) }

// A window's end is an EventAdaptive with the limit, the units in
// flight, the no-load estimate and the requests shed.
func TestLimiterReportsWindows(t *testing.T) {
	clock := newClock()
	rec := &recorder{}
	lim := newLimiter(t, clock, adaptive.WithObserver(rec), adaptive.WithName("api"),
		adaptive.WithInitialLimit(2), adaptive.WithWindow(2, 1, time.Millisecond, time.Second))
	a, _ := lim.Acquire(adaptive.Critical)
	b, _ := lim.Acquire(adaptive.Critical)
	if _, ok := lim.Acquire(adaptive.Critical); ok {
		t.Fatal("Acquire = true over the limit of 2")
	}
	clock.set(clock.Now().Add(10 * time.Millisecond))
	lim.Release(a, adaptive.Served)
	lim.Release(b, adaptive.Served)
	if len(rec.events) != 1 {
		t.Fatalf("%d events after a window, want 1", len(rec.events))
	}
	e := rec.events[0]
	if e.Kind != core.EventAdaptive || e.Limiter != "api" || e.Count != 1 || e.Latency != 10*time.Millisecond || e.Limit != 3 || e.InFlight != 0 {
		t.Errorf("event %+v, want adaptive, api, 1 shed, latency 10ms, limit 3 (2 + √2, rounded), 0 in flight", e)
	}
	if got := lim.RetryAfter(); got != 10*time.Millisecond {
		t.Errorf("RetryAfter() = %v, want the window's latency, 10ms", got)
	}
}
