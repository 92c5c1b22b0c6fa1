package memstore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/core"
)

// Defaults of the options.
const (
	// DefaultMaxKeys is the default bound on live keys.
	DefaultMaxKeys = 1 << 20
	// DefaultMaxKeyLen is the default length above which keys are hashed.
	DefaultMaxKeyLen = 256
	// DefaultSweepInterval is the default time between sweeps.
	DefaultSweepInterval = time.Minute
)

// evictSample is how many entries an insert into a full shard looks at to
// choose the one to evict.
const evictSample = 8

// Store is an in-memory core.Store. It is safe for concurrent use. Create it
// with New and stop its sweeper with Close.
type Store struct {
	shards    []shard
	mask      uint64
	seed      maphash.Seed
	clock     core.Clock // nil: the monotonic clock below
	base      time.Time  // wall and monotonic reading at New
	baseMicro int64      // base in Unix µs
	perShard  int
	maxKeyLen int

	closed    atomic.Bool
	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
	evictions atomic.Int64
}

type shard struct {
	mu sync.Mutex
	m  map[string]*entry
	_  [40]byte // keep shards' hot words on separate cache lines
}

type entry struct {
	expires int64 // µs; after it every state equals a fresh one
	states  []core.State
	one     [1]core.State // storage for the common single-limit case
}

// An Option configures a Store.
type Option func(*config)

type config struct {
	maxKeys   int
	maxKeyLen int
	shards    int
	sweep     time.Duration
	clock     core.Clock
}

// WithMaxKeys bounds the number of live keys to n (n ≥ 1). When a new key
// arrives at a full store, the store evicts, among a few sampled keys, the
// one closest to expiry: an approximation of least recently used, since
// every operation extends a key's expiry. Evicting a key forgets its usage,
// so size the bound above the keys active within your longest Period.
// Default: DefaultMaxKeys.
func WithMaxKeys(n int) Option { return func(c *config) { c.maxKeys = n } }

// WithMaxKeyLen makes keys longer than n bytes be replaced by their SHA-256
// digest, so that enormous keys cost bounded memory. Default:
// DefaultMaxKeyLen.
func WithMaxKeyLen(n int) Option { return func(c *config) { c.maxKeyLen = n } }

// WithShards sets the number of shards, rounded up to a power of two.
// Default: 16 × GOMAXPROCS, at least 64.
func WithShards(n int) Option { return func(c *config) { c.shards = n } }

// WithSweepInterval sets how often the background sweeper removes expired
// keys; 0 or less disables it (expired keys are then only replaced on
// eviction). Default: DefaultSweepInterval.
func WithSweepInterval(d time.Duration) Option { return func(c *config) { c.sweep = d } }

// WithClock sets the clock used for operations whose Op.Now is zero, and by
// the sweeper. Default: the monotonic clock, read as the wall time at New
// plus the monotonic time elapsed since (one clock read instead of
// time.Now's two, and immune to steps of the wall clock).
func WithClock(clock core.Clock) Option { return func(c *config) { c.clock = clock } }

// New returns an in-memory store and starts its sweeper.
func New(opts ...Option) *Store {
	c := config{maxKeys: DefaultMaxKeys, maxKeyLen: DefaultMaxKeyLen, sweep: DefaultSweepInterval}
	for _, o := range opts {
		o(&c)
	}
	c.maxKeys = max(c.maxKeys, 1)
	c.maxKeyLen = max(c.maxKeyLen, 1)
	if c.shards <= 0 {
		c.shards = max(64, 16*runtime.GOMAXPROCS(0))
	}
	n := 1
	for n < c.shards && n < 1<<16 {
		n <<= 1
	}
	for n > 1 && n > c.maxKeys { // at least one key per shard
		n >>= 1
	}
	s := &Store{
		shards:    make([]shard, n),
		mask:      uint64(n - 1),
		seed:      maphash.MakeSeed(),
		clock:     c.clock,
		base:      time.Now(),
		perShard:  c.maxKeys / n,
		maxKeyLen: c.maxKeyLen,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	s.baseMicro = s.base.UnixMicro()
	for i := range s.shards {
		s.shards[i].m = make(map[string]*entry)
	}
	if c.sweep > 0 {
		go s.sweeper(c.sweep)
	} else {
		close(s.done)
	}
	return s
}

// Apply implements core.Store.
func (s *Store) Apply(ctx context.Context, op core.Op) (core.Decision, error) {
	if s.closed.Load() {
		return core.Decision{}, fmt.Errorf("memstore: %s: %w", op.Kind, core.ErrClosed)
	}
	now := op.Now.UnixMicro()
	if op.Now.IsZero() {
		now = s.now()
	}
	key := op.Key
	if len(key) > s.maxKeyLen {
		sum := sha256.Sum256([]byte(key))
		key = "\x00sha256:" + string(sum[:])
	}
	sh := &s.shards[maphash.String(s.seed, key)&s.mask]
	sh.mu.Lock()
	e := sh.m[key]
	if e == nil || len(e.states) != len(op.Limits) {
		// A new key, or one whose number of limits changed: decide on
		// fresh states, which replace the entry only on success.
		d, err := s.applyNew(sh, key, &op, now)
		sh.mu.Unlock()
		return d, err
	}
	d, keep, err := core.Step(&op, now, e.states)
	if err == nil {
		if keep == 0 {
			delete(sh.m, key)
		} else {
			e.expires = now + int64(keep/time.Microsecond)
		}
	}
	sh.mu.Unlock()
	return d, err
}

// applyNew applies op to fresh scratch states, which replace key's entry
// (if any) when they differ from fresh ones afterwards. sh.mu is held.
func (s *Store) applyNew(sh *shard, key string, op *core.Op, now int64) (core.Decision, error) {
	var buf [4]core.State
	var states []core.State
	if len(op.Limits) <= len(buf) {
		states = buf[:len(op.Limits)]
	} else {
		states = make([]core.State, len(op.Limits))
	}
	d, keep, err := core.Step(op, now, states)
	if err != nil {
		return d, err
	}
	if keep == 0 {
		delete(sh.m, key)
		return d, nil
	}
	if _, ok := sh.m[key]; !ok && len(sh.m) >= s.perShard {
		s.evict(sh, now)
	}
	e := &entry{expires: now + int64(keep/time.Microsecond)}
	e.setLen(len(states))
	copy(e.states, states)
	sh.m[cloneKey(key, op.Key)] = e
	return d, nil
}

// cloneKey returns a copy of key that does not share memory with the
// caller's string (which may alias a reused request buffer, as fasthttp's
// do). A hashed key is already a fresh string.
func cloneKey(key, orig string) string {
	if key != orig {
		return key
	}
	return string(append([]byte(nil), key...))
}

func (e *entry) setLen(n int) {
	if n == 1 {
		e.one = [1]core.State{}
		e.states = e.one[:]
		return
	}
	e.states = make([]core.State, n)
}

// evict makes room in a full shard: expired entries among a sample go
// first, else the sampled entry that expires soonest. sh.mu is held.
func (s *Store) evict(sh *shard, now int64) {
	var victim string
	var soonest int64
	seen := 0
	for k, e := range sh.m { // map iteration starts at a random entry
		if e.expires <= now {
			delete(sh.m, k)
			s.evictions.Add(1)
			return
		}
		if seen == 0 || e.expires < soonest {
			victim, soonest = k, e.expires
		}
		if seen++; seen == evictSample {
			break
		}
	}
	if seen > 0 {
		delete(sh.m, victim)
		s.evictions.Add(1)
	}
}

// now returns the store's time in Unix µs.
func (s *Store) now() int64 {
	if s.clock != nil {
		return s.clock.Now().UnixMicro()
	}
	return s.baseMicro + int64(time.Since(s.base)/time.Microsecond)
}

// Len returns the number of live keys, expired ones not yet swept included.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Evictions returns how many keys have been evicted to honour WithMaxKeys.
func (s *Store) Evictions() int64 { return s.evictions.Load() }

// Sweep removes every expired key now and returns how many it removed.
// The background sweeper calls it; tests and callers may too.
func (s *Store) Sweep() int {
	now := s.now()
	removed := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if e.expires <= now {
				delete(sh.m, k)
				removed++
			}
		}
		sh.mu.Unlock()
	}
	return removed
}

func (s *Store) sweeper(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Close stops the sweeper and waits for it to return. Apply after Close
// returns an error wrapping core.ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
	})
	<-s.done
	return nil
}

var _ core.Store = (*Store)(nil)

// InProcess marks the store as core.InProcess: a Limiter calls it without a
// timeout, since it never blocks on I/O.
func (s *Store) InProcess() {}

var _ core.InProcess = (*Store)(nil)
