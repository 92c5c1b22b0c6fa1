package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	sethvargo "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	throttledmem "github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"

	"github.com/tollgate/tollgate/core"
)

// A scenario is the limit every library is configured with for one case.
type scenario int

const (
	// allowAll is 1e9 decisions per second per key with a burst of 1e9
	// (or, for fixed-window libraries, 1e9 per one-second window): far above
	// what one core can ask for, so every decision in a run is allowed.
	allowAll scenario = iota

	// denyAfterOne is 1 decision per hour per key with a burst of 1: the
	// first decision on a key (made while pre-warming) is allowed, and every
	// later one in the run is denied.
	denyAfterOne
)

// A decider makes one decision for key, the way the library's users call it.
// Implementations are safe for concurrent use.
type decider interface {
	allow(ctx context.Context, key string) (bool, error)
}

// A library builds a decider for a scenario; it registers with tb.Cleanup
// whatever must be closed.
type library struct {
	name string
	new  func(tb testing.TB, s scenario) decider
}

// libraries returns the libraries compared, Tollgate first.
func libraries() []library {
	return []library{
		{"tollgate", newTollgate},
		{"tollgate-gcra", func(tb testing.TB, s scenario) decider { return newTollgateOf(tb, s, core.GCRA) }},
		{"tollgate-tokenbucket", func(tb testing.TB, s scenario) decider { return newTollgateOf(tb, s, core.TokenBucket) }},
		{"xrate", newXRate},
		{"xrate-syncmap", newXRateSyncMap},
		{"sethvargo", newSethvargo},
		{"throttled", newThrottled},
		{"ulule", newUlule},
	}
}

// xrateKeyed is golang.org/x/time/rate keyed the way its users write it
// (x/time/rate has no keyed limiter of its own): one *rate.Limiter per key in
// a plain map behind one sync.Mutex, created on first use. sync.Map would
// spare the lock on the existing-key path, but the map and mutex is what the
// well-known tutorials and most code in the wild do.
type xrateKeyed struct {
	r rate.Limit
	b int

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// xrateSyncMap is x/time/rate in a sync.Map, the lock-free variant some
// users write: a Load on the existing-key path, LoadOrStore on a new key.
type xrateSyncMap struct {
	r        rate.Limit
	b        int
	limiters sync.Map // string → *rate.Limiter
}

func newXRateSyncMap(tb testing.TB, s scenario) decider {
	k := &xrateSyncMap{}
	switch s {
	case allowAll:
		k.r, k.b = 1e9, 1e9
	case denyAfterOne:
		k.r, k.b = rate.Every(time.Hour), 1
	}
	return k
}

func (k *xrateSyncMap) allow(_ context.Context, key string) (bool, error) {
	v, ok := k.limiters.Load(key)
	if !ok {
		v, _ = k.limiters.LoadOrStore(key, rate.NewLimiter(k.r, k.b))
	}
	return v.(*rate.Limiter).Allow(), nil
}

func newXRate(tb testing.TB, s scenario) decider {
	k := &xrateKeyed{limiters: make(map[string]*rate.Limiter)}
	switch s {
	case allowAll:
		k.r, k.b = 1e9, 1e9
	case denyAfterOne:
		k.r, k.b = rate.Every(time.Hour), 1
	}
	return k
}

func (k *xrateKeyed) allow(_ context.Context, key string) (bool, error) {
	k.mu.Lock()
	l, ok := k.limiters[key]
	if !ok {
		l = rate.NewLimiter(k.r, k.b)
		k.limiters[key] = l
	}
	k.mu.Unlock()
	return l.Allow(), nil
}

// sethvargoStore is github.com/sethvargo/go-limiter's memorystore, called
// through its Store interface as its httplimit middleware does.
//
// allowAll is expressed as 3.6e12 tokens per one-hour interval (1e9/s)
// rather than 1e9 per second: the store refills a bucket with
// ticks×(interval/tokens) tokens, which gives a single token per tick
// once tokens² exceeds the interval in nanoseconds, so a 1e9-per-second
// store would deny almost everything after its first second. No hour
// passes within a run, so every decision takes the store's existing-key,
// same-tick path, which is also its path for all but one decision per
// interval in steady state.
type sethvargoStore struct{ s sethvargo.Store }

func newSethvargo(tb testing.TB, s scenario) decider {
	cfg := &memorystore.Config{Tokens: 3_600_000_000_000, Interval: time.Hour}
	if s == denyAfterOne {
		cfg = &memorystore.Config{Tokens: 1, Interval: time.Hour}
	}
	st, err := memorystore.New(cfg)
	if err != nil {
		tb.Fatalf("memorystore.New: %v", err)
	}
	tb.Cleanup(func() {
		if err := st.Close(context.Background()); err != nil {
			tb.Errorf("memorystore Close: %v", err)
		}
	})
	return sethvargoStore{st}
}

func (s sethvargoStore) allow(ctx context.Context, key string) (bool, error) {
	_, _, _, ok, err := s.s.Take(ctx, key)
	return ok, err
}

// throttledGCRA is github.com/throttled/throttled/v2's GCRA rate limiter on
// its memstore. The store is unbounded (memstore.NewCtx(0), a map behind an
// RWMutex) rather than the README's LRU-bounded NewCtx(65536): the LRU takes
// an exclusive lock on every read and would evict keys of the 100k-key case,
// so the unbounded store is both the faster and the fair choice here.
type throttledGCRA struct{ l *throttled.GCRARateLimiterCtx }

func newThrottled(tb testing.TB, s scenario) decider {
	st, err := throttledmem.NewCtx(0)
	if err != nil {
		tb.Fatalf("memstore.NewCtx: %v", err)
	}
	quota := throttled.RateQuota{MaxRate: throttled.PerSec(1e9), MaxBurst: 1e9}
	if s == denyAfterOne {
		quota = throttled.RateQuota{MaxRate: throttled.PerHour(1), MaxBurst: 0}
	}
	l, err := throttled.NewGCRARateLimiterCtx(st, quota)
	if err != nil {
		tb.Fatalf("NewGCRARateLimiterCtx: %v", err)
	}
	return throttledGCRA{l}
}

func (t throttledGCRA) allow(ctx context.Context, key string) (bool, error) {
	limited, _, err := t.l.RateLimitCtx(ctx, key, 1)
	return !limited, err
}

// ululeLimiter is github.com/ulule/limiter/v3 (a fixed-window counter) on
// its memory store with default options (prefix "limiter", cleanup every
// 30 s), called through limiter.Limiter.Get as its middlewares do.
type ululeLimiter struct{ l *ulule.Limiter }

func newUlule(tb testing.TB, s scenario) decider {
	r := ulule.Rate{Period: time.Second, Limit: 1e9}
	if s == denyAfterOne {
		r = ulule.Rate{Period: time.Hour, Limit: 1}
	}
	return ululeLimiter{ulule.New(ululemem.NewStore(), r)}
}

func (u ululeLimiter) allow(ctx context.Context, key string) (bool, error) {
	c, err := u.l.Get(ctx, key)
	return !c.Reached, err
}
