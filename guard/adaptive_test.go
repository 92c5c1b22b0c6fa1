package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// newAdaptive returns an adaptive limit of exactly n on clock, whose
// windows end at every sample.
func newAdaptive(t *testing.T, e *env, n int) *adaptive.Limiter {
	t.Helper()
	return guardtest.FixedAdaptive(t, e.clock, n)
}

// While a request holds the only unit, the next is shed: 503, a
// Retry-After, a problem+json body of its own type, and no charge in the
// rate limit.
func TestAdaptiveShedsWith503AndChargesNothing(t *testing.T) {
	e := newEnv(t)
	rate := e.limiter(t, fixed(10, time.Minute, "per-minute"))
	ad := newAdaptive(t, e, 1)
	g := mustNew(t, rate, guard.WithAdaptive(ad))
	var inner *recorder
	var innerRan bool
	rec := newRecorder()
	err := g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), rec, func(ctx context.Context) guard.Result {
		inner, innerRan = served(t, g, request("192.0.2.2:1"))
		return guard.Result{Status: 200}
	})
	if err != nil {
		t.Fatal(err)
	}
	if innerRan || inner.status != http.StatusServiceUnavailable {
		t.Fatalf("second request: status %d, handler ran %v; want 503, not run", inner.status, innerRan)
	}
	if got := inner.header.Get(guard.HeaderRetryAfter); got != "1" {
		t.Errorf("Retry-After %q, want 1 (whole seconds, at least 1)", got)
	}
	if got := inner.header.Get(guard.HeaderContentType); got != guard.ContentTypeProblem {
		t.Errorf("Content-Type %q, want %s", got, guard.ContentTypeProblem)
	}
	var body struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(inner.body), &body); err != nil || body.Type != guard.ProblemTypeOverloaded || body.Status != 503 {
		t.Errorf("body %s (%v), want the overloaded problem type with status 503", inner.body, err)
	}
	if got := inner.header.Get(guard.HeaderRateLimitPolicy); got == "" {
		t.Error("no RateLimit-Policy on the 503: the route's policies should be listed on every response")
	}
	if got := remaining(t, rate, "192.0.2.2"); got != 10 {
		t.Errorf("the shed request's key has %d remaining, want 10: a shed request is charged nothing", got)
	}
	if got := remaining(t, rate, "192.0.2.1"); got != 9 {
		t.Errorf("the served request's key has %d remaining, want 9", got)
	}
	if s := ad.Stats(); s.InFlight != 0 || s.Shed != 1 {
		t.Errorf("Stats() = %+v, want nothing in flight and 1 shed", s)
	}
}

// A request shed by an inner middleware leaves no charge in the outer
// one's rate limit: the chain refunds it.
func TestAdaptiveShedRefundsTheChain(t *testing.T) {
	e := newEnv(t)
	rate := e.limiter(t, fixed(10, time.Minute, "per-minute"))
	ad := newAdaptive(t, e, 1)
	outer := mustNew(t, rate)
	inner := mustNew(t, nil, guard.WithAdaptive(ad))
	hold, _ := ad.Acquire(adaptive.Critical) // the one unit, held elsewhere
	rec := &chainRecorder{recorder: newRecorder()}
	req := keyfuncs.FromHTTP(request("192.0.2.1:1"))
	ran := false
	_ = outer.Serve(req, rec, func(ctx context.Context) guard.Result {
		_ = inner.Serve(req, rec, func(context.Context) guard.Result { ran = true; return guard.Result{Status: 200} })
		return guard.Result{Status: rec.status}
	})
	ad.Release(hold, adaptive.Dropped)
	if ran || rec.status != 503 {
		t.Fatalf("status %d, handler ran %v; want 503 from the inner middleware", rec.status, ran)
	}
	if got := remaining(t, rate, "192.0.2.1"); got != 10 {
		t.Errorf("outer rate limit has %d remaining, want 10: the shed request's charge is refunded", got)
	}
}

// Sheddable requests are shed while critical ones still pass.
func TestAdaptivePriorities(t *testing.T) {
	e := newEnv(t)
	ad := newAdaptive(t, e, 2) // sheddable below ⌈0.5·2⌉ = 1
	g := mustNew(t, nil, guard.WithAdaptive(ad), guard.WithPriority(func(r keyfuncs.Request) adaptive.Priority {
		if r.Path() == "/batch" {
			return adaptive.Sheddable
		}
		return adaptive.Critical
	}))
	batch := request("192.0.2.1:1")
	batch.URL.Path = "/batch"
	var second, third *recorder
	rec := newRecorder()
	_ = g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), rec, func(context.Context) guard.Result {
		second, _ = served(t, g, batch)                 // 1 in flight: sheddable refused
		third, _ = served(t, g, request("192.0.2.1:1")) // critical admitted
		return guard.Result{Status: 200}
	})
	if second.status != 503 || third.status != 200 {
		t.Errorf("sheddable %d, critical %d with 1 of 2 in flight; want 503 and 200", second.status, third.status)
	}
}

// A rule's denial, a handler's panic and a cancelled request all give the
// unit back; only a served request is a latency sample.
func TestAdaptiveReleases(t *testing.T) {
	e := newEnv(t)
	rate := e.limiter(t, fixed(1, time.Minute, "per-minute"))
	ad := newAdaptive(t, e, 5)
	g := mustNew(t, rate, guard.WithAdaptive(ad))
	served(t, g, request("192.0.2.1:1"))
	if rec, ran := served(t, g, request("192.0.2.1:1")); ran || rec.status != 429 {
		t.Fatalf("status %d, want the rate limit's 429", rec.status)
	}
	if got := ad.Stats().InFlight; got != 0 {
		t.Fatalf("InFlight %d after a rate-limit denial, want 0", got)
	}
	boom := errors.New("boom")
	mustPanic(t, boom, func() {
		_ = g.Serve(keyfuncs.FromHTTP(request("192.0.2.9:1")), newRecorder(), func(context.Context) guard.Result { panic(boom) })
	})
	if got := ad.Stats().InFlight; got != 0 {
		t.Fatalf("InFlight %d after a panicking handler, want 0", got)
	}

	g2 := mustNew(t, nil, guard.WithAdaptive(ad))
	ctx, cancel := context.WithCancel(context.Background())
	req := request("192.0.2.3:1").WithContext(ctx)
	_ = g2.Serve(keyfuncs.FromHTTP(req), newRecorder(), func(context.Context) guard.Result {
		e.clock.Advance(time.Second)
		cancel() // the client disconnects while the handler runs
		return guard.Result{Status: 200}
	})
	if s := ad.Stats(); s.InFlight != 0 || s.Latency != 0 {
		t.Fatalf("Stats() = %+v after a cancelled request, want nothing in flight and no sample", s)
	}
	_ = g2.Serve(keyfuncs.FromHTTP(request("192.0.2.3:1")), newRecorder(), func(context.Context) guard.Result {
		e.clock.Advance(30 * time.Millisecond)
		return guard.Result{Status: 200}
	})
	if s := ad.Stats(); s.Latency != 30*time.Millisecond {
		t.Fatalf("latency %v after a request served in 30ms, want 30ms", s.Latency)
	}
}

func TestNewNeedsALimiterOrAnAdaptiveLimit(t *testing.T) {
	if _, err := guard.New(nil); !errors.Is(err, guard.ErrNilLimiter) {
		t.Errorf("New(nil) = %v, want ErrNilLimiter", err)
	}
	if _, err := guard.New(nil, guard.WithAdaptive(nil)); !errors.Is(err, guard.ErrNilLimiter) && !errors.Is(err, guard.ErrInvalidOption) {
		t.Errorf("New(nil, WithAdaptive(nil)) = %v, want an error", err)
	}
	e := newEnv(t)
	if _, err := guard.New(e.limiter(t, fixed(1, time.Minute, "m")), guard.WithPriority(nil)); !errors.Is(err, guard.ErrInvalidOption) {
		t.Errorf("WithPriority(nil) = %v, want ErrInvalidOption", err)
	}
}

// Stacked middlewares sharing one adaptive limit take one unit per
// request, as they charge one limiter state once.
func TestAdaptiveStackedTakesOneUnit(t *testing.T) {
	e := newEnv(t)
	ad := newAdaptive(t, e, 1)
	outer := mustNew(t, nil, guard.WithAdaptive(ad))
	inner := mustNew(t, nil, guard.WithAdaptive(ad))
	rec := &chainRecorder{recorder: newRecorder()}
	req := keyfuncs.FromHTTP(request("192.0.2.1:1"))
	ran := false
	_ = outer.Serve(req, rec, func(context.Context) guard.Result {
		_ = inner.Serve(req, rec, func(context.Context) guard.Result {
			ran = true
			if got := ad.Stats().InFlight; got != 1 {
				t.Errorf("%d units in flight inside two middlewares of one limit, want 1", got)
			}
			return guard.Result{Status: 200}
		})
		return guard.Result{Status: 200}
	})
	if !ran || rec.status == 503 {
		t.Fatalf("handler ran %v, status %d: the inner middleware shed a request the outer admitted", ran, rec.status)
	}
	if s := ad.Stats(); s.InFlight != 0 || s.Shed != 0 {
		t.Errorf("Stats() = %+v, want nothing in flight, nothing shed", s)
	}
}

// A request that a middleware further in denies gives the outer adaptive
// limit its unit back without a latency sample: a 429's speed is not the
// service's.
func TestAdaptiveNoSampleWhenDeniedFurtherIn(t *testing.T) {
	e := newEnv(t)
	ad := newAdaptive(t, e, 5)
	outer := mustNew(t, nil, guard.WithAdaptive(ad))
	inner := mustNew(t, e.limiter(t, fixed(1, time.Minute, "per-minute")))
	for i := range 2 {
		rec := &chainRecorder{recorder: newRecorder()}
		req := keyfuncs.FromHTTP(request("192.0.2.1:1"))
		_ = outer.Serve(req, rec, func(context.Context) guard.Result {
			e.clock.Advance(time.Duration(i+1) * 10 * time.Millisecond)
			_ = inner.Serve(req, rec, func(context.Context) guard.Result { return guard.Result{Status: 200} })
			return guard.Result{Status: rec.status}
		})
	}
	if s := ad.Stats(); s.InFlight != 0 || s.Latency != 10*time.Millisecond {
		t.Errorf("Stats() = %+v, want nothing in flight and the served request's 10ms as the only sample", s)
	}
}

// panickingObserver panics on every event: an adaptive limit's observer
// that fails at the end of a window.
type panickingObserver struct{}

func (panickingObserver) ObserveDecision(context.Context, *core.Observation) {}
func (panickingObserver) ObserveEvent(context.Context, *core.Event)          { panic("observer") }

// A request stopped on its way (a key function panics) gives back what its
// rules charged even when releasing its adaptive unit panics in turn (the
// limit's observer, at the end of a window): each step on the way out
// runs whatever the one before did.
func TestAPanicReleasingTheAdaptiveUnitStillRefunds(t *testing.T) {
	e := newEnv(t)
	rate := e.limiter(t, fixed(10, time.Minute, "per-minute"))
	ad, err := adaptive.New(adaptive.WithClock(e.clock), adaptive.WithInitialLimit(5), adaptive.WithMinLimit(5), adaptive.WithMaxLimit(5),
		adaptive.WithWindow(1, 1, time.Millisecond, time.Second), adaptive.WithObserver(panickingObserver{}),
		adaptive.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	g := mustNew(t, rate, guard.WithAdaptive(ad), guard.WithRule(e.limiter(t, fixed(10, time.Minute, "other")), func(keyfuncs.Request) (string, error) {
		e.clock.Advance(2 * time.Second) // the window ends at the unit's release
		panic(boom)
	}))
	mustPanic(t, "observer", func() { served(t, g, request("192.0.2.1:1")) })
	if got := remaining(t, rate, "192.0.2.1"); got != 10 {
		t.Errorf("per-minute remaining %d after the request, want 10: its charge given back", got)
	}
	if got := ad.Stats().InFlight; got != 0 {
		t.Errorf("InFlight %d after the request, want 0", got)
	}
}
