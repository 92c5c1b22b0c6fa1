package lease

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/internal/fastclock"
)

// Store is a core.Store that decides the Takes of leasable plans in
// process, from allowances reserved on a shared store, and passes every
// other operation through (see the package documentation). It is safe for
// concurrent use. Create it with New.
type Store struct {
	shared core.Store
	conf   config
	parts  core.Partitioned // shared's, if it has parts; else nil

	wall fastclock.Wall // the default clock, as memstore's

	keys   sync.Map // entryKey → *allowance
	nkeys  atomic.Int64
	recent *recent // which keys get an allowance; nil: every key (WithMinSlice)

	closed atomic.Bool
	track  tracker // reservations, renewals and give-backs in flight

	stats counters
}

// entryKey identifies an allowance: the scope and limits of a plan (plans
// alike, of Limiters configured alike, share the key's state and so its
// allowance) and a key.
type entryKey struct {
	scope string
	id    uint64 // Plan.ID; allowances check SameLimits
	key   string
}

func keyOf(plan *engine.Plan, key string) entryKey { return entryKey{plan.Scope, plan.ID, key} }

type counters struct {
	local, reservations, waits, giveBacks, returned, expired, burned, passed atomic.Int64
}

// Stats counts what a Store did since New.
type Stats struct {
	// Local is the number of Takes decided in process, from an allowance
	// or a remembered denial, without a round trip.
	Local int64
	// Reservations is the number of Takes sent to the shared store: slices
	// reserved, and requests decided there one by one.
	Reservations int64
	// Waits is the number of Takes that waited on a round trip to the
	// shared store: their own, or another caller's for the same key.
	Waits int64
	// GiveBacks is the number of Refunds that gave unspent units back, and
	// Returned the units they returned.
	GiveBacks, Returned int64
	// Expired is the number of reserved units that expired unspent without
	// being given back (their window ended first, or the give-back failed).
	Expired int64
	// Burned is the number of units a TokenBucket's or GCRA's
	// reservations charged to lengthen their leases, never spent.
	Burned int64
	// Passed is the number of operations passed straight through: Takes of
	// plans that cannot lease, Peek, Charge, Refund, Reset and Release.
	Passed int64
}

// New returns a Store that leases from shared, with the options given.
// Invalid options and a nil shared store are errors wrapping
// core.ErrInvalidOption. The Store owns shared: its Close closes shared.
func New(shared core.Store, opts ...Option) (*Store, error) {
	if shared == nil {
		return nil, fmt.Errorf("%w: lease.New: nil shared store", core.ErrInvalidOption)
	}
	s := &Store{shared: shared, conf: config{
		maxLease: DefaultMaxLease, renew: DefaultRenewInterval, share: DefaultShare,
		minLease: DefaultMinLease, maxKeys: DefaultMaxKeys, timeout: core.DefaultTimeout,
	}}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: lease.New: nil option", core.ErrInvalidOption)
		}
		if err := o(&s.conf); err != nil {
			return nil, err
		}
	}
	if s.conf.minLease > s.conf.maxLease {
		return nil, fmt.Errorf("%w: lease.New: min lease %v above max lease %v", core.ErrInvalidOption, s.conf.minLease, s.conf.maxLease)
	}
	if s.conf.minSlice == 0 {
		s.recent = newRecent(s.conf.maxKeys, s.conf.renew.Microseconds())
	}
	s.parts, _ = shared.(core.Partitioned)
	s.wall = fastclock.NewWall()
	return s, nil
}

// Part implements core.Partitioned for a shared store that has parts (a
// Redis Cluster), so that a Limiter keeps a circuit breaker per part; it
// returns "" otherwise.
func (s *Store) Part(scope, key string) string {
	if s.parts == nil {
		return ""
	}
	return s.parts.Part(scope, key)
}

// Stats returns the Store's counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{Local: c.local.Load(), Reservations: c.reservations.Load(), Waits: c.waits.Load(),
		GiveBacks: c.giveBacks.Load(), Returned: c.returned.Load(), Expired: c.expired.Load(), Burned: c.burned.Load(), Passed: c.passed.Load()}
}

// Len returns the number of keys the Store keeps an allowance for.
func (s *Store) Len() int { return int(s.nkeys.Load()) }

// now returns op's time, or the Store's clock's, in Unix µs.
func (s *Store) now(op *engine.Op) int64 {
	if op.Now != 0 {
		return op.Now
	}
	if s.conf.clock != nil {
		return s.conf.clock.Now().UnixMicro()
	}
	return s.wall.Micros()
}

// Apply implements core.Store: a Take of a leasable plan is decided from
// the key's allowance; other operations pass through, Reset after dropping
// the allowance. The Results of operations on a key with an allowance count
// its unspent units as remaining (see the package documentation).
func (s *Store) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	if s.closed.Load() {
		return engine.Result{}, fmt.Errorf("lease: %s: %w", op.Kind, core.ErrClosed)
	}
	if err := op.Validate(); err != nil {
		return engine.Result{}, err
	}
	if !leasable(op.Plan) {
		s.stats.passed.Add(1)
		return s.shared.Apply(ctx, op)
	}
	switch op.Kind {
	case engine.Take:
		if op.Cost > 0 && op.Cost <= capacity(op.Plan) {
			return s.take(ctx, &op)
		}
	case engine.Reset:
		if a := s.lookup(op.Plan, op.Key); a != nil {
			s.drop(a)
		}
	}
	s.stats.passed.Add(1)
	a := s.lookup(op.Plan, op.Key)
	if a == nil || op.Kind == engine.Reset || op.Kind == engine.Release {
		return s.shared.Apply(ctx, op)
	}
	// Peek, Charge, Refund, and Takes of 0 or beyond the capacity, on a
	// key with an allowance: the units held count as remaining, a Peek
	// asks for what they do not cover, and the answer, the shared state
	// now, becomes what local decisions report.
	now := s.now(&op)
	a.mu.Lock()
	// A reservation of units ahead in flight sets the view from its reply,
	// which need not count this operation: were it processed after this
	// one's answer, local decisions would report the shared state without
	// this operation (a Refund's units, say) until the next reservation.
	// So this operation waits for it, and its answer, the later one, sets
	// the view. (A reservation sent while this operation is in flight can
	// still race it: the view is then off by this operation's units until
	// the next reservation or pass-through sets it again.)
	for a.ahead {
		if a.done == nil {
			a.done = make(chan struct{})
		}
		ch := a.done
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return engine.Result{}, ctx.Err()
		}
		a.mu.Lock()
	}
	a.expire(now)
	held := a.held()
	a.mu.Unlock()
	if op.Kind == engine.Peek {
		op.Cost = max(op.Cost-held, 0)
	}
	res, err := s.shared.Apply(ctx, op)
	if err != nil {
		return res, err
	}
	a.mu.Lock()
	if op.Kind != engine.Take && a.snap.Load() != nil {
		a.setView(&res, now)
	}
	held = a.held()
	a.mu.Unlock()
	addHeld(op.Plan, &res, held, true)
	return res, nil
}

// addHeld counts held unspent units as remaining in res (copying its
// Limits when own is false, since they are shared with a view).
func addHeld(plan *engine.Plan, res *engine.Result, held int64, own bool) {
	if held == 0 {
		return
	}
	if len(res.Limits) > 0 {
		if !own {
			res.Limits = append([]engine.LimitResult(nil), res.Limits...)
		}
		for i := range res.Limits {
			r := &res.Limits[i]
			r.Remaining = min(r.Remaining+held, plan.Limits[i].Capacity)
		}
		res.Remaining = res.Limits[res.Binding].Remaining
		return
	}
	res.Remaining = min(res.Remaining+held, plan.Limits[0].Capacity)
}

// lookup returns the allowance of key under plan, or nil.
func (s *Store) lookup(plan *engine.Plan, key string) *allowance {
	if v, ok := s.keys.Load(keyOf(plan, key)); ok {
		if a := v.(*allowance); a.plan == plan || a.plan.SameLimits(plan) {
			return a
		}
	}
	return nil
}

// entry returns the allowance of key under plan, creating it (and making
// room for it) when there is none.
func (s *Store) entry(plan *engine.Plan, key string) *allowance {
	k := keyOf(plan, key)
	if v, ok := s.keys.Load(k); ok {
		if a := v.(*allowance); a.plan == plan || a.plan.SameLimits(plan) {
			return a
		}
		// Other limits of the same hash (a collision): the key is
		// decided per request.
		return nil
	}
	a := &allowance{s: s, plan: plan, key: key, remaining: -1}
	v, loaded := s.keys.LoadOrStore(k, a)
	if loaded {
		if a := v.(*allowance); a.plan == plan || a.plan.SameLimits(plan) {
			return a
		}
		return nil
	}
	if s.nkeys.Add(1) > int64(s.conf.maxKeys) {
		s.evict(a)
	}
	return a
}

// evictSample is how many keys an eviction looks at.
const evictSample = 8

// evict removes one key other than keep: among a sample, one holding no
// units, else the least recently used, whose units are given back.
func (s *Store) evict(keep *allowance) {
	var victim *allowance
	var oldest int64
	n := 0
	s.keys.Range(func(_, v any) bool {
		a := v.(*allowance)
		if a == keep {
			return true
		}
		a.mu.Lock()
		free, last := a.held() == 0 && !a.ahead, a.last
		a.mu.Unlock()
		if free {
			victim = a
			return false
		}
		if victim == nil || last < oldest {
			victim, oldest = a, last
		}
		n++
		return n < evictSample
	})
	if victim != nil {
		s.forget(victim)
		victim.mu.Lock()
		lots := victim.takeLots()
		victim.epoch++
		now := victim.lastNow(victim.last)
		victim.mu.Unlock()
		s.giveBack(victim, lots, now)
	}
}

// forget removes a from the keys.
func (s *Store) forget(a *allowance) {
	a.mu.Lock()
	gone := a.gone
	a.gone = true
	a.mu.Unlock()
	if !gone && s.keys.CompareAndDelete(keyOf(a.plan, a.key), a) {
		s.nkeys.Add(-1)
	}
}

// Flush gives every unspent unit back to the shared store now, and waits
// for the give-backs and for the reservations in flight: for a rule
// reload, or a graceful drain before Close.
func (s *Store) Flush() {
	s.keys.Range(func(_, v any) bool {
		a := v.(*allowance)
		a.mu.Lock()
		lots := a.takeLots()
		now := a.lastNow(a.last)
		a.mu.Unlock()
		s.giveBack(a, lots, now)
		return true
	})
	s.track.wait()
}

// Close gives every unspent unit back to the shared store (each give-back
// bounded by the timeout), waits for renewals in flight, then closes the
// shared store. Apply after Close returns an error wrapping core.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.track.wait() // reservations in flight: what they hold is flushed next
	s.Flush()
	return s.shared.Close()
}

// tracker counts the Store's calls in flight, so that Close can wait for
// them: an atomic count, polled by wait (which only Close and Flush call).
type tracker struct{ n atomic.Int64 }

func (t *tracker) add()  { t.n.Add(1) }
func (t *tracker) done() { t.n.Add(-1) }

func (t *tracker) wait() {
	for i := 0; t.n.Load() > 0; i++ {
		if i < 100 {
			runtime.Gosched() // most calls in flight end within µs
		} else {
			time.Sleep(time.Millisecond)
		}
	}
}

// ApplyLocal decides op in process when it can (see core.Store): a Take
// that the key's allowance covers, without the allowance's lock. It
// returns false, changing nothing, for anything else, which Apply decides.
func (s *Store) ApplyLocal(op engine.Op) (engine.Result, bool) {
	if op.Kind != engine.Take || op.Cost <= 0 || op.Plan == nil || s.closed.Load() {
		return engine.Result{}, false
	}
	a := s.lookup(op.Plan, op.Key)
	if a == nil || a.frontEnd.Load() == 0 {
		return engine.Result{}, false
	}
	res, ok := a.fast(op.Cost, s.now(&op), op.Now)
	if ok {
		s.stats.local.Add(1)
	}
	return res, ok
}
