package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// flakyStore is a remote-looking store (not InProcess) whose Apply returns
// err when set, or blocks until the context is done when hang is set.
type flakyStore struct {
	calls       atomic.Int64
	err         atomic.Pointer[error]
	hang        atomic.Bool
	hadDeadline atomic.Bool
}

func (s *flakyStore) Apply(ctx context.Context, op core.Op) (core.Decision, error) {
	s.calls.Add(1)
	_, ok := ctx.Deadline()
	s.hadDeadline.Store(ok)
	if s.hang.Load() {
		<-ctx.Done()
		return core.Decision{}, fmt.Errorf("flaky: %w", ctx.Err())
	}
	if e := s.err.Load(); e != nil {
		return core.Decision{}, *e
	}
	return core.Decision{Allowed: true, Cost: op.Cost, Limit: op.Limits[0], Remaining: 1}, nil
}

func (s *flakyStore) Close() error { return nil }

func (s *flakyStore) fail(err error) { s.err.Store(&err) }

// inProcessStore is a flakyStore marked InProcess.
type inProcessStore struct{ flakyStore }

func (*inProcessStore) InProcess() {}

var errDown = errors.New("connection refused")

func newPolicyLimiter(t *testing.T, s core.Store, opts ...core.Option) (*core.Limiter, *atomic.Int64) {
	t.Helper()
	var hooked atomic.Int64
	opts = append([]core.Option{core.PerSecond(10), core.WithErrorHook(func(context.Context, string, error) { hooked.Add(1) })}, opts...)
	lim, err := core.New(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim, &hooked
}

func TestFailurePolicies(t *testing.T) {
	fallback := memstore.New()
	defer fallback.Close()
	tests := []struct {
		name    string
		policy  core.FailurePolicy
		allowed bool
		wantErr error
	}{
		{"FailClosed returns an error wrapping ErrUnavailable and the store's", core.FailClosed, false, core.ErrUnavailable},
		{"the zero policy is FailClosed", core.FailurePolicy{}, false, core.ErrUnavailable},
		{"FailOpen allows without an error", core.FailOpen, true, nil},
		{"Fallback decides on the fallback store", core.Fallback(fallback), true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &flakyStore{}
			s.fail(errDown)
			lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(tt.policy))
			d, err := lim.AllowN(context.Background(), "k", 2)
			if d.Allowed != tt.allowed || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("AllowN(k, 2) on a failing store = %+v, %v; want allowed %v, error %v", d, err, tt.allowed, tt.wantErr)
			}
			if err != nil && !errors.Is(err, errDown) {
				t.Errorf("error %v does not wrap the store's error", err)
			}
			if hooked.Load() != 1 {
				t.Errorf("hook called %d times, want 1", hooked.Load())
			}
			if tt.policy == core.Fallback(fallback) && (d.Remaining != 8 || d.Limit.Quota != 10) {
				t.Errorf("Fallback decision %+v, want the fallback store's (8 remaining of 10)", d)
			}
		})
	}
}

func TestFailurePolicyFallbackFailingToo(t *testing.T) {
	s, fb := &flakyStore{}, &flakyStore{}
	s.fail(errDown)
	fb.fail(errors.New("fallback down"))
	lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(core.Fallback(fb)))
	if _, err := lim.Allow(context.Background(), "k"); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Allow with both stores failing: err = %v, want one wrapping ErrUnavailable", err)
	}
	if hooked.Load() != 2 {
		t.Errorf("hook called %d times, want 2 (both failures)", hooked.Load())
	}
}

func TestInvalidInputIsNotAFailure(t *testing.T) {
	s := &flakyStore{}
	lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithBreaker(1, time.Hour))
	for _, err := range []error{core.ErrInvalidCost, core.ErrInvalidKey, core.ErrInvalidLimit, core.ErrInvalidOp, core.ErrClosed} {
		s.fail(fmt.Errorf("store: %w", err))
		if _, got := lim.Allow(context.Background(), "k"); !errors.Is(got, err) {
			t.Errorf("Allow with a store returning %v: err = %v, want it returned as is", err, got)
		}
	}
	if hooked.Load() != 0 {
		t.Errorf("hook called %d times for invalid input", hooked.Load())
	}
	s.err.Store(nil)
	if d, err := lim.Allow(context.Background(), "k"); err != nil || d.Remaining != 1 {
		t.Errorf("Allow after invalid input = %+v, %v; the breaker opened", d, err)
	}
}

func TestBreaker(t *testing.T) {
	const coolDown = 30 * time.Millisecond
	s := &flakyStore{}
	lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithBreaker(3, coolDown))
	ctx := context.Background()
	s.fail(errDown)
	for range 3 {
		lim.Allow(ctx, "k")
	}
	if s.calls.Load() != 3 {
		t.Fatalf("store called %d times by 3 failing calls", s.calls.Load())
	}
	for range 10 {
		lim.Allow(ctx, "k")
	}
	if s.calls.Load() != 3 || hooked.Load() != 13 {
		t.Fatalf("after 3 consecutive failures: store called %d times, hook %d; want the store skipped and the hook called", s.calls.Load(), hooked.Load())
	}
	time.Sleep(coolDown)
	lim.Allow(ctx, "k") // the probe fails: open again
	lim.Allow(ctx, "k")
	if s.calls.Load() != 4 {
		t.Fatalf("after the cool-down: store called %d times, want 4 (one probe)", s.calls.Load())
	}
	time.Sleep(coolDown)
	s.err.Store(nil)
	if d, err := lim.Allow(ctx, "k"); err != nil || d.Remaining != 1 {
		t.Fatalf("probe on a recovered store = %+v, %v", d, err)
	}
	for range 5 {
		lim.Allow(ctx, "k")
	}
	if s.calls.Load() != 10 {
		t.Errorf("after a successful probe: store called %d times, want 10 (closed)", s.calls.Load())
	}
}

func TestTimeoutOpensTheBreakerAtOnce(t *testing.T) {
	s := &flakyStore{}
	s.hang.Store(true)
	lim, hooked := newPolicyLimiter(t, s, core.WithTimeout(10*time.Millisecond), core.WithBreaker(100, time.Hour))
	start := time.Now()
	_, err := lim.Allow(context.Background(), "k")
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Allow on a hanging store took %v with a 10ms timeout", took)
	}
	if !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Allow on a hanging store: err = %v, want ErrUnavailable wrapping the deadline", err)
	}
	start = time.Now()
	lim.Allow(context.Background(), "k")
	if took := time.Since(start); took > 5*time.Millisecond || s.calls.Load() != 1 {
		t.Errorf("second Allow took %v and called the store %d times: the breaker did not open", took, s.calls.Load())
	}
	if hooked.Load() != 2 {
		t.Errorf("hook called %d times, want 2", hooked.Load())
	}
}

func TestCallerCancellationIsNotAFailure(t *testing.T) {
	s := &flakyStore{}
	s.hang.Store(true)
	lim, hooked := newPolicyLimiter(t, s, core.WithTimeout(time.Hour), core.WithBreaker(1, time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := lim.Allow(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Allow with the caller's context expiring: err = %v, want the context's error as is", err)
	}
	s.hang.Store(false)
	if _, err := lim.Allow(context.Background(), "k"); err != nil || hooked.Load() != 0 {
		t.Errorf("Allow afterwards: %v, hook called %d times: the caller's deadline counted as a failure", err, hooked.Load())
	}
}

func TestInProcessStoresGetNoTimeout(t *testing.T) {
	remote, local := &flakyStore{}, &inProcessStore{}
	for _, tt := range []struct {
		store        core.Store
		hadDeadline  *atomic.Bool
		wantDeadline bool
	}{{remote, &remote.hadDeadline, true}, {local, &local.hadDeadline, false}} {
		lim, _ := newPolicyLimiter(t, tt.store)
		lim.Allow(context.Background(), "k")
		if tt.hadDeadline.Load() != tt.wantDeadline {
			t.Errorf("%T: call had a deadline %v, want %v", tt.store, tt.hadDeadline.Load(), tt.wantDeadline)
		}
	}
	var _ core.InProcess = (*memstore.Store)(nil)
}
