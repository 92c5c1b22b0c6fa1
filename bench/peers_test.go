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

// A scenario is the limit every library is configured with for one case,
// and what its decisions must be.
type scenario int

const (
	// allowAll is 1e8 per second with a burst of 1e8 (or, for fixed-window
	// libraries, 1e8 per one-second window): far above what one core asks
	// for, so every decision in a run is allowed. Its Burst × Period,
	// 1e14 µs, is below 2^47 µs.
	allowAll scenario = iota

	// allowLarge is 1e9 per hour with a burst of 1e9: every decision is
	// allowed, and Burst × Period (3.6e18 µs) passes 2^47 µs and 2^53 µs,
	// where exact integer arithmetic needs more than a double's mantissa.
	allowLarge

	// denyAfterOne is 1 per hour with a burst of 1: the first decision on a
	// key (made while pre-warming) is allowed, and every later one in the
	// run is denied.
	denyAfterOne

	// denyFew is 5 per second with a burst of 5, a limit of a few per
	// second: pre-warming uses up every key's burst, and the run is denied
	// but for the few decisions each key's refill admits (at most 5 a
	// second, checked: see allowedBound).
	denyFew
)

// limitOf returns the numbers of s's limit: quota per period, and the
// burst (the capacity of GCRA and token buckets; fixed and sliding
// windows have quota).
func (s scenario) limit() (quota int64, period time.Duration, burst int64) {
	switch s {
	case allowLarge:
		return 1_000_000_000, time.Hour, 1_000_000_000
	case denyAfterOne:
		return 1, time.Hour, 1
	case denyFew:
		return 5, time.Second, 5
	}
	return 100_000_000, time.Second, 100_000_000
}

// allowed reports whether s's decisions are meant to be allowed.
func (s scenario) allowed() bool { return s == allowAll || s == allowLarge }

// warmups is how many decisions pre-warming makes on each key: one, or the
// whole burst of a limit that the run is to find used up.
func (s scenario) warmups() int {
	if s == denyFew {
		_, _, burst := s.limit()
		return int(burst)
	}
	return 1
}

// allowedBound is the most decisions of a denied scenario that may be
// allowed over keys in elapsed: what each key's limit refills in that time,
// one window more for a window's boundary. 0 for denyAfterOne (no hour
// passes in a run).
func (s scenario) allowedBound(keys int, elapsed time.Duration) int64 {
	if s != denyFew {
		return 0
	}
	quota, period, _ := s.limit()
	return int64(keys) * quota * (int64(elapsed/period) + 2)
}

// A decider makes one decision for key, the way the library's users call it.
// Implementations are safe for concurrent use. Each is a pointer whose
// allow has a pointer receiver, so that every library is called alike: a
// value receiver on a struct of two words or more goes through a wrapper
// the compiler makes, which copies the struct (30 instructions a decision
// for Tollgate's until 2026-11-27, against 19 for sethvargo's).
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
	k.r, k.b = xrateLimit(s)
	return k
}

// xrateLimit returns s's limit as x/time/rate's rate and burst.
func xrateLimit(s scenario) (rate.Limit, int) {
	quota, period, burst := s.limit()
	return rate.Limit(float64(quota) / period.Seconds()), int(burst)
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
	k.r, k.b = xrateLimit(s)
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
// allowAll is expressed as 3.6e11 tokens per one-hour interval (1e8/s)
// rather than 1e8 per second: the store refills a bucket with
// ticks×(interval/tokens) tokens, which gives a single token per tick
// once tokens² exceeds the interval in nanoseconds, so a 1e8-per-second
// store would deny almost everything after its first second. No hour
// passes within a run, so every decision takes the store's existing-key,
// same-tick path, which is also its path for all but one decision per
// interval in steady state. Its buckets hold as many tokens as an
// interval refills: no burst of its own.
type sethvargoStore struct{ s sethvargo.Store }

func newSethvargo(tb testing.TB, s scenario) decider {
	quota, period, _ := s.limit()
	cfg := &memorystore.Config{Tokens: uint64(quota), Interval: period}
	if s == allowAll {
		cfg = &memorystore.Config{Tokens: uint64(quota) * 3600, Interval: time.Hour}
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
	return &sethvargoStore{st}
}

func (s *sethvargoStore) allow(ctx context.Context, key string) (bool, error) {
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
	q, period, burst := s.limit()
	// MaxBurst is the burst beyond the first request.
	quota := throttled.RateQuota{MaxRate: throttled.PerDuration(int(q), period), MaxBurst: int(burst) - 1}
	l, err := throttled.NewGCRARateLimiterCtx(st, quota)
	if err != nil {
		tb.Fatalf("NewGCRARateLimiterCtx: %v", err)
	}
	return &throttledGCRA{l}
}

func (t *throttledGCRA) allow(ctx context.Context, key string) (bool, error) {
	limited, _, err := t.l.RateLimitCtx(ctx, key, 1)
	return !limited, err
}

// ululeLimiter is github.com/ulule/limiter/v3 (a fixed-window counter) on
// its memory store with default options (prefix "limiter", cleanup every
// 30 s), called through limiter.Limiter.Get as its middlewares do.
type ululeLimiter struct{ l *ulule.Limiter }

func newUlule(tb testing.TB, s scenario) decider {
	quota, period, _ := s.limit()
	r := ulule.Rate{Period: period, Limit: quota}
	return &ululeLimiter{ulule.New(ululemem.NewStore(), r)}
}

func (u *ululeLimiter) allow(ctx context.Context, key string) (bool, error) {
	c, err := u.l.Get(ctx, key)
	return !c.Reached, err
}
