package guard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// recorder is a guard.Writer that records what the Guard writes.
type recorder struct {
	header http.Header
	status int
	body   string
	writes int
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) SetHeader(name, value string) { r.header[name] = []string{value} }

func (r *recorder) WriteResponse(status int, body []byte) error {
	r.status, r.body = status, string(body)
	r.writes++
	return nil
}

// served runs g for req and reports the response and whether next ran.
func served(t *testing.T, g *guard.Guard, req *http.Request) (rec *recorder, nextRan bool) {
	t.Helper()
	rec = newRecorder()
	err := g.Serve(keyfuncs.FromHTTP(req), rec, func(ctx context.Context) guard.Result {
		nextRan = true
		rec.status = 200
		return guard.Result{Status: 200, Bytes: 2}
	})
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	return rec, nextRan
}

func request(remote string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	return r
}

// env is a memstore on a fake clock and a factory of limiters over it.
type env struct {
	clock *guardtest.Clock
	store *memstore.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := guardtest.NewClock(guardtest.Epoch)
	st := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	t.Cleanup(func() { st.Close() })
	return &env{clock: clock, store: st}
}

func (e *env) limiter(t *testing.T, limits ...core.Limit) *core.Limiter {
	t.Helper()
	return limiterOn(t, e.store, e.clock, limits...)
}

func limiterOn(t *testing.T, st core.Store, clock core.Clock, limits ...core.Limit) *core.Limiter {
	t.Helper()
	opts := []core.Option{core.WithClock(clock)}
	for _, l := range limits {
		opts = append(opts, l)
	}
	lim, err := core.New(st, opts...)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	return lim
}

func mustNew(t *testing.T, lim *core.Limiter, opts ...guard.Option) *guard.Guard {
	t.Helper()
	g, err := guard.New(lim, opts...)
	if err != nil {
		t.Fatalf("guard.New: %v", err)
	}
	return g
}

// remaining peeks at key's remaining units under lim's binding limit.
func remaining(t *testing.T, lim *core.Limiter, key string) int64 {
	t.Helper()
	d, err := lim.Peek(context.Background(), key)
	if err != nil {
		t.Fatalf("Peek(%q): %v", key, err)
	}
	return d.Remaining
}

func fixed(n int64, d time.Duration, name string) core.Limit {
	return core.Per(n, d).WithAlgorithm(core.FixedWindow).Named(name)
}

// stubStore answers every operation with d's numbers: hostile decisions
// for the header encoder.
type stubStore struct{ d core.Decision }

func (s stubStore) Apply(context.Context, engine.Op) (engine.Result, error) {
	return engine.Result{Allowed: s.d.Allowed, Remaining: s.d.Remaining, Reset: us(s.d.ResetAfter),
		Retry: us(s.d.RetryAfter), Delay: us(s.d.Delay), Window: us(s.d.EffectiveWindow)}, nil
}
func (stubStore) Close() error { return nil }

// us is d in µs, Never as -1, as a Result holds it.
func us(d time.Duration) int64 {
	if d == core.Never {
		return -1
	}
	return d.Microseconds()
}

// refundFailingStore is a store whose Refund operations fail; the others
// go to Store.
type refundFailingStore struct{ core.Store }

func (s refundFailingStore) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	if op.Kind == engine.Refund {
		return engine.Result{}, guardtest.ErrStore
	}
	return s.Store.Apply(ctx, op)
}

// mustPanic calls f and fails t unless f panics with want.
func mustPanic(t *testing.T, want any, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if got := recover(); got != want {
			t.Errorf("recovered %v, want the panic %v to propagate unchanged", got, want)
		}
	}()
	f()
}

// flakyStore is a store that fails while down is set, and otherwise is
// Store. It is not InProcess, so that a Limiter calls it as a remote one.
type flakyStore struct {
	core.Store
	down atomic.Bool
}

func (s *flakyStore) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	if s.down.Load() {
		return engine.Result{}, guardtest.ErrStore
	}
	return s.Store.Apply(ctx, op)
}

// turnStore is an InProcess store that records the turn of every Take it
// admits: op.Now + Delay, when the request leaves a LeakyBucket queue.
// Stores count time in whole microseconds, and so does the turn.
type turnStore struct {
	core.Store
	mu sync.Mutex
	at []time.Time
}

func (*turnStore) InProcess() {}

func (s *turnStore) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	r, err := s.Store.Apply(ctx, op)
	if err == nil && op.Kind == engine.Take && r.Allowed {
		s.mu.Lock()
		s.at = append(s.at, time.UnixMicro(op.Now+r.Delay))
		s.mu.Unlock()
	}
	return r, err
}

// refundGate is a turnStore that holds the first Refund until proceed is
// closed, after closing refunding.
type refundGate struct {
	turnStore
	once      sync.Once
	refunding chan struct{}
	proceed   chan struct{}
}

func (s *refundGate) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	if op.Kind == engine.Refund {
		s.once.Do(func() {
			close(s.refunding)
			<-s.proceed
		})
	}
	return s.turnStore.Apply(ctx, op)
}

// takes returns the number of admitted Takes.
func (s *turnStore) takes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

// turns returns the turns recorded, in the order of the Takes.
func (s *turnStore) turns() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at)
}

// waitTakes waits until n Takes were admitted.
func (s *turnStore) waitTakes(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.takes() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d Takes admitted after 10s, want %d", s.takes(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
