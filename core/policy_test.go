package core_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
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

func (s *flakyStore) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	s.calls.Add(1)
	_, ok := ctx.Deadline()
	s.hadDeadline.Store(ok)
	if s.hang.Load() {
		<-ctx.Done()
		return engine.Result{}, fmt.Errorf("flaky: %w", ctx.Err())
	}
	if e := s.err.Load(); e != nil {
		return engine.Result{}, *e
	}
	return engine.Result{Allowed: true, Remaining: 1}, nil
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
	lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithBreaker(core.Breaker{Consecutive: 1, MinOutage: time.Nanosecond, CoolDown: time.Hour}))
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

// refusedErr is the error a dial to a closed port returns.
var refusedErr = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

func TestBreakerOpensAtOnceOnARefusedConnection(t *testing.T) {
	s := &flakyStore{}
	lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithBreaker(core.Breaker{CoolDown: time.Hour}))
	s.fail(fmt.Errorf("redis: %w", refusedErr))
	for range 10 {
		if d, err := lim.Allow(context.Background(), "k"); err != nil || !d.Allowed || d.Source != core.FromFailOpen {
			t.Fatalf("Allow on a refusing store with FailOpen = %+v, %v", d, err)
		}
	}
	if s.calls.Load() != 1 || hooked.Load() != 10 {
		t.Errorf("10 calls after a refused connection: store called %d times, hook %d; want 1 and 10", s.calls.Load(), hooked.Load())
	}
}

// A stall shorter than MinOutage fails the calls caught in it and no more,
// however many of them fail at once. (The timeout is 100ms, MinOutage
// 300ms: the 16 calls would have to start 200ms apart to look like an
// outage, which a loaded machine did at 20ms.)
func TestBreakerStaysClosedThroughAStall(t *testing.T) {
	s := &flakyStore{}
	const timeout = 100 * time.Millisecond
	lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithTimeout(timeout))
	s.hang.Store(true)
	var wg sync.WaitGroup
	for range 16 { // 16 consecutive failures, far more than Consecutive (5)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lim.Allow(context.Background(), "k")
		}()
	}
	wg.Wait()
	s.hang.Store(false)
	before := s.calls.Load()
	for i := range 10 {
		if d, err := lim.Allow(context.Background(), "k"); err != nil || d.Source != core.FromStore {
			t.Fatalf("Allow #%d after a %v stall = %+v, %v; want the store's decision", i, timeout, d, err)
		}
	}
	if got := s.calls.Load() - before; got != 10 || hooked.Load() != 16 {
		t.Errorf("after the stall: store called %d times for 10 calls, hook %d times; want 10 and 16", got, hooked.Load())
	}
}

// A store that hangs is skipped once failures have lasted MinOutage: three
// timeouts by default.
func TestBreakerOpensOnAnOutage(t *testing.T) {
	s := &flakyStore{}
	const timeout = 10 * time.Millisecond
	lim, _ := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithTimeout(timeout), core.WithBreaker(core.Breaker{CoolDown: time.Hour}))
	s.hang.Store(true)
	start := time.Now()
	for time.Since(start) < time.Second && s.calls.Load() < 100 {
		lim.Allow(context.Background(), "k")
	}
	calls := s.calls.Load()
	for range 10 {
		lim.Allow(context.Background(), "k")
	}
	if s.calls.Load() != calls {
		t.Fatalf("the breaker did not open: %d calls reached a hanging store", s.calls.Load())
	}
	// Consecutive (5) failures, the first started MinOutage (30ms) before
	// the last failed: 5 here, a few more on a slow machine.
	if calls < 4 || calls > 10 {
		t.Errorf("the breaker opened after %d calls to a hanging store, want about 5", calls)
	}
}

// A store failing every other call never fails twice in a row; the failure
// rate over the window opens the breaker.
func TestBreakerOpensOnAFailureRate(t *testing.T) {
	s := &alternatingStore{}
	lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithBreaker(core.Breaker{CoolDown: time.Hour}))
	for range 100 {
		lim.Allow(context.Background(), "k")
	}
	// MinCalls (20) calls with half of them failed open it.
	if n := s.calls.Load(); n < 20 || n > 22 {
		t.Errorf("a store failing every other call was called %d times of 100 (hook %d), want the breaker open after 20", n, hooked.Load())
	}
}

// alternatingStore fails every other call.
type alternatingStore struct{ flakyStore }

func (s *alternatingStore) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	if s.calls.Load()%2 == 1 {
		s.calls.Add(1)
		return engine.Result{}, errDown
	}
	return s.flakyStore.Apply(ctx, op)
}

func TestBreakerProbesAndCloses(t *testing.T) {
	const coolDown = 30 * time.Millisecond
	s := &flakyStore{}
	lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithBreaker(core.Breaker{CoolDown: coolDown}))
	ctx := context.Background()
	s.fail(refusedErr)
	lim.Allow(ctx, "k")
	for range 10 {
		lim.Allow(ctx, "k")
	}
	if s.calls.Load() != 1 || hooked.Load() != 11 {
		t.Fatalf("after a refused connection: store called %d times, hook %d; want the store skipped and the hook called", s.calls.Load(), hooked.Load())
	}
	time.Sleep(coolDown)
	lim.Allow(ctx, "k") // the probe fails: open again
	lim.Allow(ctx, "k")
	if s.calls.Load() != 2 {
		t.Fatalf("after the cool-down: store called %d times, want 2 (one probe)", s.calls.Load())
	}
	time.Sleep(coolDown)
	s.err.Store(nil)
	if d, err := lim.Allow(ctx, "k"); err != nil || d.Remaining != 1 || d.Source != core.FromStore {
		t.Fatalf("probe on a recovered store = %+v, %v", d, err)
	}
	for range 5 {
		lim.Allow(ctx, "k")
	}
	if s.calls.Load() != 8 {
		t.Errorf("after a successful probe: store called %d times, want 8 (closed)", s.calls.Load())
	}
}

func TestBreakerDisabled(t *testing.T) {
	s := &flakyStore{}
	lim, hooked := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithBreaker(core.Breaker{Disabled: true}))
	s.fail(refusedErr)
	for range 10 {
		lim.Allow(context.Background(), "k")
	}
	if s.calls.Load() != 10 || hooked.Load() != 10 {
		t.Errorf("without a breaker: store called %d times for 10 calls, hook %d", s.calls.Load(), hooked.Load())
	}
}

func TestTimeoutBoundsACall(t *testing.T) {
	s := &flakyStore{}
	s.hang.Store(true)
	lim, hooked := newPolicyLimiter(t, s, core.WithTimeout(10*time.Millisecond))
	start := time.Now()
	_, err := lim.Allow(context.Background(), "k")
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Allow on a hanging store took %v with a 10ms timeout", took)
	}
	if !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Allow on a hanging store: err = %v, want ErrUnavailable wrapping the deadline", err)
	}
	if hooked.Load() != 1 {
		t.Errorf("hook called %d times, want 1", hooked.Load())
	}
}

func TestCallerCancellationIsNotAFailure(t *testing.T) {
	s := &flakyStore{}
	s.hang.Store(true)
	lim, hooked := newPolicyLimiter(t, s, core.WithTimeout(time.Hour), core.WithBreaker(core.Breaker{Consecutive: 1, MinOutage: time.Nanosecond}))
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

// With FleetSize(n), n instances falling back each on its own store admit
// together at most the limit; without it, each admits the whole limit.
func TestFallbackFleetShare(t *testing.T) {
	const quota, fleet = 10, 4
	for _, tt := range []struct {
		name string
		opts []core.FallbackOption
		want int64
	}{
		{"each instance of a fleet of 4 admits a quarter of the limit (rounded down)", []core.FallbackOption{core.FleetSize(fleet)}, fleet * (quota / fleet)},
		{"without FleetSize each instance admits the whole limit", nil, fleet * quota},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := newManualClock(t0)
			var admitted int64
			for range fleet {
				s := &flakyStore{}
				s.fail(errDown)
				fb := memstore.New(memstore.WithSweepInterval(0))
				t.Cleanup(func() { fb.Close() })
				lim, _ := newPolicyLimiter(t, s, core.WithClock(clock), core.PerMinute(quota).Named("per-minute"),
					core.WithFailurePolicy(core.Fallback(fb, tt.opts...)), core.WithBreaker(core.Breaker{Disabled: true}))
				for range 2 * quota {
					d, err := lim.Allow(context.Background(), "k")
					if err != nil {
						t.Fatalf("Allow: %v", err)
					}
					if d.Allowed {
						admitted++
						if d.Source != core.FromFallback || d.Limit.Name != "per-minute" {
							t.Errorf("fallback decision %+v, want Source FromFallback and the limit's own name", d)
						}
					}
				}
			}
			if admitted != tt.want {
				t.Errorf("a fleet of %d on their fallback stores admitted %d of a quota of %d per minute, want %d", fleet, admitted, quota, tt.want)
			}
		})
	}
}

// sharedStore is a memstore seen as a remote store (not InProcess), that
// can be made to fail: the shared store of a fleet.
type sharedStore struct {
	ms   *memstore.Store
	down atomic.Bool
}

func (s *sharedStore) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	if s.down.Load() {
		return engine.Result{}, errDown
	}
	return s.ms.Apply(ctx, op)
}

func (s *sharedStore) Close() error { return nil }

// In the window in which the shared store fails, a fleet sized right
// admits at most twice the limit: what the shared store admitted before,
// and the fleet's shares of a fresh limit after.
func TestFallbackAcrossTheStartOfAnOutage(t *testing.T) {
	const quota, fleet = 20, 4
	clock := newManualClock(t0)
	shared := &sharedStore{ms: memstore.New(memstore.WithSweepInterval(0))}
	t.Cleanup(func() { shared.ms.Close() })
	var lims []*core.Limiter
	for range fleet {
		fb := memstore.New(memstore.WithSweepInterval(0))
		t.Cleanup(func() { fb.Close() })
		lim, err := core.New(shared, core.PerMinute(quota).WithAlgorithm(core.FixedWindow), core.WithClock(clock),
			core.WithFailurePolicy(core.Fallback(fb, core.FleetSize(fleet))))
		if err != nil {
			t.Fatal(err)
		}
		lims = append(lims, lim)
	}
	admitted := 0
	hammer := func() {
		for range 3 * quota {
			for _, lim := range lims {
				if d, err := lim.Allow(context.Background(), "k"); err == nil && d.Allowed {
					admitted++
				}
			}
		}
	}
	hammer()
	if admitted != quota {
		t.Fatalf("the fleet on the shared store admitted %d, want the quota %d", admitted, quota)
	}
	shared.down.Store(true)
	hammer()
	if want := quota + fleet*(quota/fleet); admitted != want {
		t.Errorf("across the start of the outage the fleet admitted %d in one window, want %d (at most twice the quota)", admitted, want)
	}
}

// partedStore is a Partitioned store whose keys starting with "a" live in
// part "A", which fails, and the others in part "B", which does not.
type partedStore struct {
	flakyStore
	callsA, callsB atomic.Int64
}

func (s *partedStore) Part(_, key string) string {
	if strings.HasPrefix(key, "a") {
		return "A"
	}
	return "B"
}

func (s *partedStore) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	if s.Part(op.Plan.Scope, op.Key) == "A" {
		s.callsA.Add(1)
		return engine.Result{}, fmt.Errorf("node A: %w", refusedErr)
	}
	s.callsB.Add(1)
	return s.flakyStore.Apply(ctx, op)
}

// A part that fails opens its own breaker: the others keep deciding.
func TestBreakerPerPart(t *testing.T) {
	s := &partedStore{}
	lim, _ := newPolicyLimiter(t, s, core.WithFailurePolicy(core.FailOpen), core.WithBreaker(core.Breaker{CoolDown: time.Hour}))
	for i := range 20 {
		lim.Allow(context.Background(), "a"+strconv.Itoa(i))
		d, err := lim.Allow(context.Background(), "b"+strconv.Itoa(i))
		if err != nil || d.Source != core.FromStore {
			t.Fatalf("Allow(b%d) beside a failing part = %+v, %v; want the store's decision", i, d, err)
		}
	}
	if s.callsA.Load() != 1 || s.callsB.Load() != 20 {
		t.Errorf("part A called %d times (want 1: its breaker opened), part B %d times (want 20)", s.callsA.Load(), s.callsB.Load())
	}
}

// Units in flight that the Fallback store acquired while the primary was
// down are released on the Fallback, though the primary is back by then:
// sent to the primary, the release would free nothing, and the units
// would block the key at the next outage until their lease ran out.
func TestUnitsTheFallbackAcquiredAreReleasedThere(t *testing.T) {
	primary := newRemoteStore(t)
	fallback := memstore.New(memstore.WithSweepInterval(0))
	defer fallback.Close()
	lim, err := core.New(primary, core.InFlight(1, time.Minute), core.WithFailurePolicy(core.Fallback(fallback)),
		core.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allow := func(want core.Source) core.Decision {
		t.Helper()
		d, err := lim.Allow(ctx, "k")
		if err != nil || !d.Allowed || d.Source != want || d.Lease <= 0 {
			t.Fatalf("Allow(k) = %+v, %v, want allowed from %v with a lease", d, err, want)
		}
		return d
	}

	primary.down.Store(true)
	onFallback := allow(core.FromFallback)
	primary.down.Store(false)
	onPrimary := allow(core.FromStore)

	calls := primary.calls.Load()
	if _, err := lim.Release(ctx, "k", onFallback.Lease); err != nil {
		t.Fatalf("Release of the fallback's lease: %v", err)
	}
	if n := primary.calls.Load() - calls; n != 0 {
		t.Errorf("Release of the fallback's lease made %d calls to the primary store, want 0", n)
	}
	if _, err := lim.Release(ctx, "k", onPrimary.Lease); err != nil {
		t.Fatalf("Release of the primary's lease: %v", err)
	}
	if n := primary.calls.Load() - calls; n != 1 {
		t.Errorf("Release of the primary's lease made %d calls to the primary store, want 1", n)
	}
	if d, err := lim.Peek(ctx, "k"); err != nil || d.Remaining != 1 {
		t.Errorf("Peek(k) on the primary = %+v, %v, want its unit back", d, err)
	}

	primary.down.Store(true) // the next outage: the fallback's unit is free again
	d := allow(core.FromFallback)
	if _, err := lim.Release(ctx, "k", d.Lease); err != nil {
		t.Fatalf("Release during the outage: %v", err)
	}
	allow(core.FromFallback)
}

// A fleet's share of a WithLimitsFunc plan is worked out once, not on
// every call of an outage: the fallback's decisions then count as the
// share, and cost no more allocations than those of the Limiter's own
// limits.
func TestFleetShareOfALimitsFuncPlanIsKept(t *testing.T) {
	tier := []core.Limit{core.PerHour(40).Named("tier")}
	newLim := func(opts ...core.Option) *core.Limiter {
		t.Helper()
		primary := newRemoteStore(t)
		primary.down.Store(true)
		fb := memstore.New(memstore.WithSweepInterval(0))
		t.Cleanup(func() { fb.Close() })
		opts = append(opts, core.WithFailurePolicy(core.Fallback(fb, core.FleetSize(4))),
			core.WithLogger(slog.New(slog.DiscardHandler)), core.WithBreaker(core.Breaker{Disabled: true}))
		lim, err := core.New(primary, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return lim
	}
	byFunc := newLim(core.WithLimitsFunc(func(context.Context, string) []core.Limit { return tier }))
	own := newLim(tier[0])
	ctx := context.Background()
	admitted := 0
	for range 20 {
		if d, err := byFunc.Allow(ctx, "k"); err == nil && d.Allowed {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("the fallback admitted %d of 20, want the share of 40 for a fleet of 4: 10", admitted)
	}
	allocs := func(lim *core.Limiter) float64 {
		return testing.AllocsPerRun(200, func() { lim.Allow(ctx, "other") })
	}
	if got, want := allocs(byFunc), allocs(own); got > want {
		t.Errorf("a fallback decision on a WithLimitsFunc plan makes %v allocations, more than the %v of the Limiter's own limits", got, want)
	}
}

// What one instance of a fleet admits on its fallback store under
// saturation (FleetSize's doc): the share is ⌊Q/n⌋, and the counters that
// weigh the previous window (SlidingWindow) pass a period's share less one
// once the requests never stop, while the others pass the whole share
// (and the rated ones, which start full, what refills in the first
// second on top).
func TestFallbackShareUnderSaturation(t *testing.T) {
	const quota, fleet, seconds = 10, 4, 8
	const every = 5 * time.Millisecond // 200 requests a second
	for _, tt := range []struct {
		alg core.Algorithm
		// admitted in each second after the first, in which the
		// fallback store starts from nothing
		want int
	}{
		{core.SlidingWindow, quota/fleet - 1},
		{core.FixedWindow, quota / fleet},
		{core.SlidingLog, quota / fleet},
		{core.TokenBucket, quota / fleet},
		{core.GCRA, quota / fleet},
	} {
		t.Run(tt.alg.String(), func(t *testing.T) {
			clock := newManualClock(t0)
			s := &flakyStore{}
			s.fail(errDown)
			fb := memstore.New(memstore.WithSweepInterval(0))
			t.Cleanup(func() { fb.Close() })
			lim, err := core.New(s, core.WithClock(clock), core.PerSecond(quota).WithAlgorithm(tt.alg),
				core.WithFailurePolicy(core.Fallback(fb, core.FleetSize(fleet))), core.WithBreaker(core.Breaker{Disabled: true}),
				core.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			per := make([]int, seconds)
			for i := range seconds * int(time.Second/every) {
				clock.Set(t0.Add(time.Duration(i) * every))
				d, err := lim.Allow(context.Background(), "k")
				if err != nil {
					t.Fatalf("Allow: %v", err)
				}
				if d.Allowed {
					per[i*int(every)/int(time.Second)]++
				}
			}
			if per[0] < quota/fleet {
				t.Errorf("first second admitted %d, want at least the whole share %d", per[0], quota/fleet)
			}
			for s, n := range per[1:] {
				if n != tt.want {
					t.Errorf("second %d admitted %d of a share of %d per second, want %d (all: %v)", s+1, n, quota/fleet, tt.want, per)
					break
				}
			}
		})
	}
}

// byStore is a flakyStore with ApplyBy: it records the deadline it was
// given and whether the context had one of its own, and a hanging call
// waits for the earlier of the two, as core.Store's doc asks.
type byStore struct {
	flakyStore
	by      atomic.Int64 // the deadline of the last ApplyBy, Unix ns
	ctxDead atomic.Bool  // the context of the last ApplyBy had a deadline
}

func (s *byStore) ApplyBy(ctx context.Context, op engine.Op, deadline time.Time) (engine.Result, error) {
	s.by.Store(deadline.UnixNano())
	_, ok := ctx.Deadline()
	s.ctxDead.Store(ok)
	if s.hang.Load() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return engine.Result{}, fmt.Errorf("by: %w", ctx.Err())
		case <-t.C:
			return engine.Result{}, fmt.Errorf("by: %w", context.DeadlineExceeded)
		}
	}
	return s.flakyStore.Apply(ctx, op)
}

// A store with ApplyBy gets the Limiter's timeout as its deadline, and the
// caller's context as it is: no context with a timer per call. Its own
// timeout error is a failure, as Apply's is.
func TestTheTimeoutGoesToApplyBy(t *testing.T) {
	s := &byStore{}
	const timeout = 250 * time.Millisecond
	lim, hooked := newPolicyLimiter(t, s, core.WithTimeout(timeout))
	before := time.Now()
	if d, err := lim.Allow(context.Background(), "k"); err != nil || !d.Allowed {
		t.Fatalf("Allow = %+v, %v", d, err)
	}
	after := time.Now()
	if s.flakyStore.calls.Load() != 1 {
		t.Fatalf("the store was called %d times, want once through ApplyBy", s.flakyStore.calls.Load())
	}
	by := time.Unix(0, s.by.Load())
	if by.Before(before.Add(timeout)) || by.After(after.Add(timeout)) {
		t.Errorf("ApplyBy's deadline is %v after the call began, want the timeout, %v", by.Sub(before), timeout)
	}
	if s.ctxDead.Load() {
		t.Errorf("ApplyBy's context has a deadline of its own: the Limiter made one")
	}

	s.hang.Store(true)
	_, err := lim.Allow(context.Background(), "k")
	if !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Allow past ApplyBy's deadline: err = %v, want ErrUnavailable wrapping the deadline", err)
	}
	if hooked.Load() != 1 {
		t.Errorf("hook called %d times, want 1", hooked.Load())
	}
}
