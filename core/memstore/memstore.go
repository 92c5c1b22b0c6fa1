package memstore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/internal/fastclock"
	"github.com/tollgate/tollgate/internal/storeflags"
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

// minPerShard is the fewest keys a shard is sized for.
const minPerShard = 256

// evictSample is how many entries an insert into a full shard looks at to
// choose the one to evict.
const evictSample = 8

// Store is an in-memory core.Store. It is safe for concurrent use. Create it
// with New and stop its sweeper with Close.
type Store struct {
	once      // core may lend it each limit's part of a Result (storeflags)
	shards    []shard
	mask      uint64
	seed      maphash.Seed
	clock     core.Clock     // nil: the monotonic clock below
	wall      fastclock.Wall // the default clock
	perShard  int
	maxKeyLen int

	closed    atomic.Bool
	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
	evictions atomic.Int64 // all, lossy included
	lossy     atomic.Int64

	// Reports (report.go): to obs, and to the log; by the background
	// goroutine every ReportInterval, and by Close.
	name     string
	obs      core.Observer // nil: none
	logger   *slog.Logger  // nil: slog.Default()
	reportMu sync.Mutex
	reported [2]int64 // evictions and lossy evictions at the last report
}

// once is storeflags.Once, embedded in Store under a name of this
// package's: it applies each op once, before Apply returns, and keeps no
// Result.
type once = storeflags.Once

// shard maps a key to its entries, one per scope (engine.Plan.Scope),
// chained: a key usually has one scope. heap holds every entry, chained
// ones included, so len(heap) is the shard's number of entries.
type shard struct {
	mu   sync.Mutex
	t    table      // key → the head of its chain, by the key's hash (table.go)
	heap []expiring // a min-heap on at: see expiring
	seed maphash.Seed
	_    [72]byte // 128 bytes: shards' hot words on separate cache lines
}

// expiring is an entry's place in its shard's heap, which finds expired
// entries without scanning the shard. at is at most e.expires: an
// operation that extends an entry leaves the heap alone (the hot path does
// no heap work), and the entry moves to its new place when at comes and it
// turns out not to have expired. Each extension costs at most one such
// move, so the heap's work is O(log n) per operation, amortized.
type expiring struct {
	at int64
	e  *entry
}

// size is what engine.Debt needs of a limit besides its state: kept per
// state of an entry of several states, so that eviction can weigh every
// state of a key, those of other layouts included, without holding on to
// callers' Limits. A solo entry's is its plan's limit's (entry.size).
type size struct{ quota, capacity int64 }

// maxStatesPerKey bounds the limit layouts one key keeps state for.
const maxStatesPerKey = 16

// An Option configures a Store.
type Option func(*config)

type config struct {
	maxKeys   int
	maxKeyLen int
	shards    int
	sweep     time.Duration
	clock     core.Clock
	name      string
	obs       core.Observer
	logger    *slog.Logger
	bad       string // an option New cannot use (see New)
}

// WithMaxKeys bounds the number of live keys to at most n. The bound is
// kept per shard (n divided evenly), so a store evicts a little before it
// holds n keys when keys spread unevenly; small bounds use fewer shards.
//
// A new key arriving at a full shard makes room, losslessly first: while
// the shard holds an expired key (fully replenished, so that forgetting it
// changes no decision), expired keys go and no other. Only a shard of live
// keys loses usage (a lossy eviction, counted by LossyEvictions): it evicts,
// among 8 sampled keys (all, in a shard of fewer), the one with the least
// debt — the largest share of its capacity that any of its limits still
// uses at that instant (engine.Debt) — and among equals the one that expires
// soonest.
//
// So a key is evicted with usage only when no key sampled with it is less
// in debt. A flood of distinct keys keeps the store at n keys and costs
// lossy evictions, but mostly of its own keys: a flood of keys each used
// below capacity (one request each, say) evicts a key in full debt
// (exhausted, or owing post-hoc overage) only when a sample of 8 holds none
// of the flood's keys, only keys in full debt. A flood whose keys each use
// their whole capacity competes with exhausted keys on equal terms. Size
// the bound above the keys active within your longest Period, and watch
// LossyEvictions. n ≤ 0 means the default. Default: DefaultMaxKeys.
func WithMaxKeys(n int) Option { return func(c *config) { c.maxKeys = n } }

// WithMaxKeyLen makes keys longer than n bytes be stored under their
// SHA-256 digest, so that enormous keys cost bounded memory. Digests live in
// a namespace of their own: no key of n bytes or fewer, whatever its bytes
// (a digest included), shares state with a long key. n ≤ 0 means the
// default. Default: DefaultMaxKeyLen.
func WithMaxKeyLen(n int) Option { return func(c *config) { c.maxKeyLen = n } }

// WithShards sets the number of shards, rounded up to a power of two.
// Default: 16 × GOMAXPROCS, at least 64.
func WithShards(n int) Option { return func(c *config) { c.shards = n } }

// WithSweepInterval sets how often the background goroutine removes
// expired keys; 0 or less disables sweeping (expired keys are then only
// replaced on eviction). Default: DefaultSweepInterval.
func WithSweepInterval(d time.Duration) Option { return func(c *config) { c.sweep = d } }

// WithClock sets the clock used for operations whose engine.Op.Now is 0, and by
// the sweeper. Default: the monotonic clock, read as the wall time at New
// plus the monotonic time elapsed since (one clock read instead of
// time.Now's two, and immune to steps of the wall clock). On amd64 Linux,
// when the CPU's time-stamp counter is invariant and the kernel's clock
// runs on it, and the build is not purego, the default reads that counter
// instead, turned into the monotonic clock's time at a rate measured
// against it and anchored to it again every 100 ms (package
// internal/fastclock): the same time to within about a microsecond
// typically and 150 µs while the counter keeps its rate (after a suspend
// or a jump of the counter, off by up to the jump for at most 100 ms),
// for about a third of the cost.
// core.SystemClock() reads time.Now on every operation instead. A store
// made inside a testing/synctest bubble follows the bubble's fake clock;
// one made outside reads real time, even from inside a bubble.
func WithClock(clock core.Clock) Option { return func(c *config) { c.clock = clock } }

// New returns an in-memory store and starts its background goroutine,
// which sweeps expired keys and reports to observers and the log. New
// panics, saying why, when given WithObserver(nil) or WithLogger(nil): a
// programmer's error, as a nil Limiter is to an adapter's New (the other
// options replace what they cannot use with their default).
func New(opts ...Option) *Store {
	c := config{maxKeys: DefaultMaxKeys, maxKeyLen: DefaultMaxKeyLen, sweep: DefaultSweepInterval, name: DefaultName}
	for _, o := range opts {
		o(&c)
	}
	if c.bad != "" {
		panic("memstore: New: " + c.bad)
	}
	if c.maxKeys <= 0 {
		c.maxKeys = DefaultMaxKeys
	}
	if c.maxKeyLen <= 0 {
		c.maxKeyLen = DefaultMaxKeyLen
	}
	if c.shards <= 0 {
		c.shards = max(64, 16*runtime.GOMAXPROCS(0))
	}
	n := 1
	for n < c.shards && n < 1<<16 {
		n <<= 1
	}
	// The bound is kept per shard (maxKeys/shards each), so a skewed
	// spread of keys can fill one shard early: keep shards large enough for
	// that to cost little, with fewer shards for a small bound.
	for n > 1 && c.maxKeys/n < minPerShard {
		n >>= 1
	}
	s := &Store{
		shards:    make([]shard, n),
		mask:      uint64(n - 1),
		seed:      maphash.MakeSeed(),
		clock:     c.clock,
		perShard:  min(c.maxKeys/n, math.MaxInt32), // heap slots are int32
		maxKeyLen: c.maxKeyLen,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		name:      c.name,
		obs:       c.obs,
		logger:    c.logger,
	}
	s.wall = fastclock.NewWall()
	for i := range s.shards {
		s.shards[i].seed = s.seed // remove hashes a key again
	}
	go s.background(c.sweep)
	return s
}

// Apply implements core.Store.
func (s *Store) Apply(ctx context.Context, op engine.Op) (res engine.Result, err error) {
	err = s.apply(&op, &res)
	return res, err
}

// apply is Apply with op and its Result in place: it writes the Result to
// res, which is zero.
func (s *Store) apply(op *engine.Op, res *engine.Result) (err error) {
	if s.closed.Load() {
		return fmt.Errorf("memstore: %s: %w", op.Kind, core.ErrClosed)
	}
	if op.Plan == nil {
		return op.Validate()
	}
	now := op.Now
	if now == 0 {
		now = s.now()
	}
	key, hashed := op.Key, false
	if len(key) > s.maxKeyLen {
		sum := sha256.Sum256([]byte(key))
		key, hashed = string(sum[:]), true
	}
	h := hashKey(s.seed, key)
	sh := &s.shards[h&s.mask]
	if quickPlan(op.Plan) {
		if e := sh.t.get(h, key); e != nil && e.hashed == hashed { // without the shard's lock: see table
			if done, err := e.quick(sh, op, now, res); done {
				return err
			}
		}
	}
	return s.applyLocked(sh, h, key, hashed, op, now, res)
}

// applyLocked is apply under the shard's lock, for an op quick did not
// apply: key (hashed, when it is a long key's digest) of hash h, in sh.
func (s *Store) applyLocked(sh *shard, h uint64, key string, hashed bool, op *engine.Op, now int64, res *engine.Result) (err error) {
	sh.mu.Lock()
	e := sh.t.get(h, key)
	for e != nil && (e.hashed != hashed || e.plan != op.Plan && e.plan.Scope != op.Plan.Scope) {
		e = e.next()
	}
	switch {
	case e == nil:
		err = s.applyNew(sh, h, key, hashed, op, now, res)
	case e.plan == op.Plan:
		e.mu.Lock()
		var keep int64
		keep, err = engine.Step(op, now, e.states(), res)
		if err == nil {
			e.settle(sh, now, keep)
		}
		e.mu.Unlock()
	default:
		e.mu.Lock()
		err = e.applyMixed(sh, op, now, res)
		e.mu.Unlock()
	}
	sh.mu.Unlock()
	return err
}

// quick applies op, of a quickPlan, to e, found without the shard's lock,
// holding only e's own lock, and reports whether it did: it does when e's
// states are laid out for op's plan (its plan is op's), and leaves e and
// res alone otherwise. An operation after which the entry is to go (fully
// replenished) or to expire sooner (a refund) needs the shard too, which
// comes first in the locks' order: quick takes it if it is free, and
// otherwise lets go of e, takes both in order, and settles e as it is
// then (see settleLate).
//
// This is the path of nearly every decision, and it writes nothing that
// another key's decision reads: over many keys in parallel, the shard's
// lock was the one line the cores handed to each other on every decision.
func (e *entry) quick(sh *shard, op *engine.Op, now int64, res *engine.Result) (bool, error) {
	e.mu.Lock()
	if e.dead || e.plan != op.Plan {
		e.mu.Unlock()
		return false, nil
	}
	keep, err := engine.Step(op, now, e.states(), res)
	if err == nil { // else nothing changed
		e.settleQuick(sh, now, keep)
	}
	e.mu.Unlock()
	return true, err
}

// settleQuick settles e after an operation of quick or TakeBrief at now
// left it to be kept keep µs more (see quick). e.mu is held, and still is
// after.
func (e *entry) settleQuick(sh *shard, now, keep int64) {
	if keep > 0 && now+keep >= e.expires {
		e.expires = now + keep // nearly always, and small enough to be inlined
	} else {
		e.settleShard(sh, now, keep)
	}
}

// settleShard is settleQuick when e is to go, or to expire sooner: that
// needs the shard's lock.
func (e *entry) settleShard(sh *shard, now, keep int64) {
	switch {
	case sh.mu.TryLock(): // never waits: the shard's lock comes first elsewhere
		e.settle(sh, now, keep)
		sh.mu.Unlock()
	default:
		plan := e.plan // the operation's: quick or TakeBrief checked it under e.mu, held since
		e.mu.Unlock()
		sh.mu.Lock()
		e.mu.Lock()
		e.settleLate(sh, plan, now)
		sh.mu.Unlock()
	}
}

// quickPlan reports whether an operation of plan may take quick's path:
// a plan whose limits have no log. Others go straight to the shard, not
// through a lookup and an entry's lock that quick would let go of.
func quickPlan(plan *engine.Plan) bool {
	for i := range plan.Limits {
		if plan.Limits[i].Algorithm.Logs() {
			return false
		}
	}
	return true
}

// settleLate settles e after an operation at now whose settling waited
// for the shard's lock, so that other operations may have run on e in
// between: it settles e as it is, by the time its state is fully
// replenished (a Peek's keep at now: the same instant whichever now asks,
// as a state's time to full is a point in time). Nothing is left to do if
// e is gone, or its states are no longer laid out for plan (whoever
// changed that settled it). sh.mu and e.mu are held.
func (e *entry) settleLate(sh *shard, plan *engine.Plan, now int64) {
	if e.dead || e.plan != plan {
		return
	}
	peek := engine.Op{Plan: plan, Key: e.key, Kind: engine.Peek}
	var res engine.Result
	if keep, err := engine.Step(&peek, now, e.states(), &res); err == nil {
		e.settle(sh, now, keep)
	}
}

// Take does what Apply does for a Take of cost units for key under plan at
// the store's clock, and returns the Result in brief (see core.Store; a
// core.Limiter of one limit calls TakeBrief, the same in registers). For a plan of
// several limits the Brief holds the combined Result's numbers, without
// those of each limit.
func (s *Store) Take(ctx context.Context, plan *engine.Plan, key string, cost int64) (b engine.Brief, err error) {
	b.Allowed, b.Remaining, b.Reset, b.Wait, b.Window, b.Lease, b.At, err = s.TakeBrief(ctx, plan, key, cost)
	return b, err
}

// TakeBrief is Take with the Brief's fields returned one by one, in
// registers (see core.Store): a core.Limiter of one limit calls it.
//
// On a plan of one limit without a log, a key stored as it is and a valid
// cost, which is nearly every decision of a Limiter, it is quick's path
// without the Op, the Result and the checks apply and Step make of any
// operation: engine.TakeOne returns the numbers in registers. A key it
// does not find so goes under the shard's lock with the time, hash and
// shard it has (applyLocked). Any other Take goes through apply.
func (s *Store) TakeBrief(ctx context.Context, plan *engine.Plan, key string, cost int64) (allowed bool, remaining, reset, wait, window, lease, at int64, err error) {
	if plan == nil || len(plan.Limits) != 1 || plan.Limits[0].Algorithm.Logs() || key == "" || len(key) > s.maxKeyLen || cost < 0 || s.closed.Load() {
		op := engine.Op{Plan: plan, Key: key, Kind: engine.Take, Cost: cost}
		var res engine.Result
		err = s.apply(&op, &res)
		return brief(&res, err)
	}
	var now int64 // s.now(), in line: its call was a level of calls
	if s.clock == nil {
		now = s.sinceBase()
	} else {
		now = s.clock.Now().UnixMicro()
	}
	h := hashKey(s.seed, key)
	sh := &s.shards[h&s.mask]
	if e := sh.t.get(h, key); e != nil && !e.hashed { // as quick does
		e.mu.Lock()
		if !e.dead && e.plan == plan {
			var keep int64
			allowed, remaining, reset, wait, window, lease, keep = engine.TakeOne(plan, cost, now, &e.states()[0])
			e.settleQuick(sh, now, keep)
			e.mu.Unlock()
			return allowed, remaining, reset, wait, window, lease, now, nil
		}
		e.mu.Unlock()
	}
	op := engine.Op{Plan: plan, Key: key, Kind: engine.Take, Cost: cost}
	var res engine.Result
	err = s.applyLocked(sh, h, key, false, &op, now, &res)
	return brief(&res, err)
}

// brief returns TakeBrief's results of res and err.
func brief(res *engine.Result, err error) (allowed bool, remaining, reset, wait, window, lease, at int64, _ error) {
	b := engine.BriefOf(res)
	return b.Allowed, b.Remaining, b.Reset, b.Wait, b.Window, b.Lease, b.At, err
}

// remove unlinks e from its key's chain and the heap, and marks it dead
// for lookups that found it without the shard's lock. sh.mu and e.mu are
// held.
func (sh *shard) remove(e *entry) {
	h := hashKey(sh.seed, e.key)
	head := sh.t.get(h, e.key)
	switch {
	case head == e && e.next() == nil:
		sh.t.del(h, e.key)
	case head == e:
		sh.t.set(h, e.next())
	default:
		for p := head; p != nil; p = p.next() {
			if p.next() == e {
				p.setNext(e.next())
				break
			}
		}
	}
	e.dead = true
	sh.unheap(e)
}

// settle records how long e must be kept after an operation whose states
// are the first of e.all(); other layouts' states keep it at least as long
// as before. sh.mu and e.mu are held.
func (e *entry) settle(sh *shard, now int64, keep int64) {
	until := now + keep
	all := e.solo || len(e.aux.states) == e.aux.n // no other layout's state
	switch {
	case all && keep == 0:
		sh.remove(e)
	case all && until < e.expires: // a refund, or a clock that stepped back
		e.expires = until
		sh.lower(e)
	case all:
		e.expires = until
	default:
		e.expires = max(e.expires, until)
	}
}

// debt returns the share of its capacity that e's most used limit still
// uses at now (engine.Debt): 0 when forgetting e loses nothing, 1 when some
// limit is exhausted or owes more.
func (e *entry) debt(now int64) float64 {
	d := 0.0
	for i, st := range e.all() {
		sz := e.size(i)
		d = max(d, engine.Debt(st, sz.quota, sz.capacity, now))
		if d >= 1 {
			break
		}
	}
	return d
}

// applyMixed applies op to an existing key whose states are not laid out
// for op's plan: it matches states to limits by layout, runs Step on them
// (fresh ones for layouts the key has no state for) and stores them back,
// first and in order, so that the next op of the same plan takes the fast
// path. Nothing changes on error. sh.mu and e.mu are held.
func (e *entry) applyMixed(sh *shard, op *engine.Op, now int64, res *engine.Result) error {
	limits := op.Plan.Limits
	n := len(limits)
	var buf [4]engine.State
	var from [4]int
	scratch, src := buf[:0], from[:0]
	if n <= len(buf) {
		scratch, src = buf[:n], from[:n]
	} else {
		scratch, src = make([]engine.State, n), make([]int, n)
	}
	cur := e.all()
	for i := range limits {
		src[i] = -1
		for j := range cur {
			if cur[j].Ident == limits[i].Ident && !taken(src[:i], j) {
				scratch[i], src[i] = cur[j], j
				break
			}
		}
	}
	keep, err := engine.Step(op, now, scratch, res)
	if err != nil {
		return err
	}
	aligned := len(cur) >= n
	for i := 0; aligned && i < n; i++ {
		aligned = src[i] == i
	}
	if aligned { // same layouts in the same places: another plan of equal limits
		copy(cur, scratch)
		e.plan = op.Plan
		if !e.solo { // a solo entry's numbers are its plan's
			e.aux.n = n
			for i := range limits {
				e.aux.sizes[i] = size{limits[i].Quota, limits[i].Capacity}
			}
		}
		e.settle(sh, now, keep)
		return nil
	}
	// The op's states first, in order; then the other layouts' states,
	// with the numbers of the limits that last stepped them.
	states := make([]engine.State, 0, len(cur)+n)
	sizes := make([]size, 0, len(cur)+n)
	states = append(states, scratch...)
	for i := range limits {
		sizes = append(sizes, size{limits[i].Quota, limits[i].Capacity})
	}
	for j := range cur {
		if !taken(src, j) && len(states) < maxStatesPerKey {
			states = append(states, cur[j])
			sizes = append(sizes, e.size(j))
		}
	}
	e.plan = op.Plan
	e.hold(states, sizes, n)
	e.settle(sh, now, keep)
	return nil
}

func taken(src []int, j int) bool {
	for _, k := range src {
		if k == j {
			return true
		}
	}
	return false
}

// applyNew applies op to a key with no entry, on fresh scratch states that
// are stored only if they differ from fresh ones afterwards. sh.mu is held.
func (s *Store) applyNew(sh *shard, h uint64, key string, hashed bool, op *engine.Op, now int64, res *engine.Result) error {
	limits := op.Plan.Limits
	var buf [4]engine.State
	var states []engine.State
	if len(limits) <= len(buf) {
		states = buf[:len(limits)]
	} else {
		states = make([]engine.State, len(limits))
	}
	keep, err := engine.Step(op, now, states, res)
	if err != nil || keep == 0 {
		return err
	}
	if len(sh.heap) >= s.perShard {
		s.evict(sh, now)
	}
	e := newEntry(key)
	e.setNext(sh.t.get(h, key)) // the key's other scopes, if any
	e.plan, e.expires, e.hashed = op.Plan, now+keep, hashed
	if len(states) == 1 {
		e.holdOne(states[0])
	} else {
		sizes := make([]size, len(limits))
		for i := range limits {
			sizes[i] = size{limits[i].Quota, limits[i].Capacity}
		}
		e.hold(slices.Clone(states), sizes, len(states))
	}
	sh.push(e)
	sh.t.set(h, e) // last: from here a lookup without the lock may find e
	return nil
}

// evict makes room in a full shard for one more entry, losing as little as
// it can (see WithMaxKeys): an expired entry if there is one, else the
// sampled entry with the least debt, the one that expires soonest among
// equals. sh.mu is held.
func (s *Store) evict(sh *shard, now int64) {
	if sh.expire(now, 1) == 1 {
		s.evictions.Add(1)
		return
	}
	// Every entry is live: weigh a sample of evictSample distinct entries,
	// drawn from the heap's slots by a generator clients cannot predict.
	var buf [evictSample]int
	picked := buf[:0]
	if len(sh.heap) <= evictSample {
		for i := range sh.heap {
			picked = append(picked, i)
		}
	} else {
		for len(picked) < evictSample {
			if i := rand.IntN(len(sh.heap)); !slices.Contains(picked, i) {
				picked = append(picked, i)
			}
		}
	}
	// The sampled entries stay locked until the victim is gone, so that
	// no decision changes what they were weighed by (no other path holds
	// two entries' locks, or waits for the shard holding one).
	var victim *entry
	least, victimExpires := 0.0, int64(0) // the victim's debt and expiry
	var held [evictSample]*entry
	locked := held[:0]
	for _, i := range picked {
		e := sh.heap[i].e
		e.mu.Lock()
		locked = append(locked, e)
		d := e.debt(now)
		if victim == nil || d < least || (d == least && e.expires < victimExpires) {
			victim, least, victimExpires = e, d, e.expires
		}
		if d == 0 {
			break
		}
	}
	if victim != nil {
		sh.remove(victim)
		s.evictions.Add(1)
		if least > 0 {
			s.lossy.Add(1)
		}
	}
	for _, e := range locked {
		e.mu.Unlock()
	}
}

// expire removes up to max entries that have expired by now, earliest
// first, and returns how many it removed. Entries extended since they took
// their place in the heap move to their new place on the way. sh.mu is
// held.
func (sh *shard) expire(now int64, max int) int {
	removed := 0
	for removed < max && len(sh.heap) > 0 && sh.heap[0].at <= now {
		e := sh.heap[0].e
		e.mu.Lock()
		if e.expires <= now {
			sh.remove(e)
			e.mu.Unlock()
			removed++
			continue
		}
		sh.heap[0].at = e.expires
		e.mu.Unlock()
		sh.down(0)
	}
	return removed
}

// push adds e to the heap. sh.mu is held.
func (sh *shard) push(e *entry) {
	sh.heap = append(sh.heap, expiring{e.expires, e})
	sh.up(len(sh.heap) - 1)
}

// unheap removes e from the heap. sh.mu is held.
func (sh *shard) unheap(e *entry) {
	i, last := int(e.slot), len(sh.heap)-1
	if i != last {
		sh.heap[i] = sh.heap[last]
		sh.heap[i].e.slot = int32(i)
	}
	sh.heap[last] = expiring{} // no pointer left behind the length
	sh.heap = sh.heap[:last]
	if i != last {
		sh.down(i)
		sh.up(i)
	}
}

// lower moves e up the heap after its expiry came earlier. sh.mu is held.
func (sh *shard) lower(e *entry) {
	if i := int(e.slot); sh.heap[i].at > e.expires {
		sh.heap[i].at = e.expires
		sh.up(i)
	}
}

func (sh *shard) up(i int) {
	h := sh.heap
	x := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= x.at {
			break
		}
		h[i] = h[p]
		h[i].e.slot = int32(i)
		i = p
	}
	h[i] = x
	x.e.slot = int32(i)
}

func (sh *shard) down(i int) {
	h := sh.heap
	x := h[i]
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1].at < h[c].at {
			c++
		}
		if x.at <= h[c].at {
			break
		}
		h[i] = h[c]
		h[i].e.slot = int32(i)
		i = c
	}
	h[i] = x
	x.e.slot = int32(i)
}

// hashKey returns key's hash under seed: the runtime's hash of a string,
// the one a map[string] uses (AES-based where the CPU has it), which
// maphash.Comparable reaches in one call fewer than maphash.String (22
// instructions of about 705 in a hot key's decision, by callgrind).
func hashKey(seed maphash.Seed, key string) uint64 { return maphash.Comparable(seed, key) }

// now returns the store's time in Unix µs.
func (s *Store) now() int64 {
	if s.clock != nil {
		return s.clock.Now().UnixMicro()
	}
	return s.sinceBase()
}

// sinceBase is the default clock: the wall time at New plus the monotonic
// time elapsed since, in Unix µs, read through the CPU's counter where
// the kernel vouches for it (fastclock: about 12 ns a read on amd64
// Linux, where time.Since costs about 40).
func (s *Store) sinceBase() int64 {
	return s.wall.Micros()
}

// Len returns the number of live keys (a key used by Limiters of several
// scopes counts once per scope), expired ones not yet swept included.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.heap)
		sh.mu.Unlock()
	}
	return n
}

// Evictions returns how many keys have been evicted to make room for new
// ones under WithMaxKeys: expired keys, whose eviction forgets nothing (the
// sweeper's removals are not counted), and the keys with usage that
// LossyEvictions counts.
func (s *Store) Evictions() int64 { return s.evictions.Load() }

// LossyEvictions returns how many of Evictions forgot a key that still had
// usage (not yet fully replenished): such a key's next request starts from
// a fresh state, with its whole quota. A count that grows means the
// WithMaxKeys bound is below the keys active within a Period, or a flood
// of distinct keys.
func (s *Store) LossyEvictions() int64 { return s.lossy.Load() }

// Sweep removes every expired key now and returns how many it removed.
// The background sweeper calls it; tests and callers may too.
func (s *Store) Sweep() int {
	now := s.now()
	removed := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		removed += sh.expire(now, math.MaxInt)
		sh.mu.Unlock()
	}
	return removed
}

// background sweeps every sweep (never, if sweep ≤ 0) and reports every
// ReportInterval, until Close.
func (s *Store) background(sweep time.Duration) {
	defer close(s.done)
	var sweeps <-chan time.Time
	if sweep > 0 {
		t := time.NewTicker(sweep)
		defer t.Stop()
		sweeps = t.C
	}
	reports := time.NewTicker(ReportInterval)
	defer reports.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-sweeps:
			s.Sweep()
		case <-reports.C:
			s.report()
		}
	}
}

// Close stops the background goroutine and waits for it to return, then
// reports a last time (see WithObserver). Apply after Close returns an
// error wrapping core.ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.done
		s.report()
	})
	return nil
}

var _ core.Store = (*Store)(nil)

// InProcess marks the store as core.InProcess: a Limiter calls it without a
// timeout, since it never blocks on I/O.
func (s *Store) InProcess() {}

var _ core.InProcess = (*Store)(nil)
