package core

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/tollgate/tollgate/core/engine"
)

// DenyCache configures WithDenyCache. The zero value takes the defaults.
type DenyCache struct {
	// Size bounds the keys remembered at once (below 16, 16). When it is
	// reached, a new denial takes the place of an expired one, or of a
	// random one.
	// Default: 10,000 (about 1 MB with 64-byte keys).
	Size int
	// MaxAge bounds how long a denial is remembered, however long its
	// RetryAfter: it is how long a Refund, Reset or Release made through
	// another Limiter (another instance of the fleet) can go unseen here.
	// Default: 1s.
	MaxAge time.Duration
}

// Defaults of DenyCache.
const (
	DefaultDenyCacheSize   = 10_000
	DefaultDenyCacheMaxAge = time.Second
)

// WithDenyCache makes the Limiter remember, in memory, the denials its
// store made (Envoy's over-limit local cache): once a key is denied a cost
// with RetryAfter r, further AllowN and PeekN of that cost for the key are
// denied by the Limiter itself for min(r, MaxAge), without a round trip to
// the store, with the same Decision, its times less the time elapsed since
// the store's reply and Source FromDenyCache. An abusive key then costs the store about one call
// per retry interval instead of one per request, and the other keys' calls
// no longer queue behind its flood.
//
// A remembered denial differs from what the store would say only when the
// key's state changes by some other way than time before it runs out: a
// Refund, Reset or Release made through another Limiter, or another
// Limiter's Take or Charge, which makes the remembered RetryAfter too short
// (this Limiter's own operations that change the key forget it at once). Then, for at
// most MaxAge, this Limiter denies what the store would admit; it never
// admits what the store would deny. Denials by a Concurrency limit are not
// remembered (a release elsewhere may free a unit at any moment), nor are
// those of the failure policy. Remaining is the store's at the denial.
//
// It suits a Limiter on a remote store (Redis); on memstore a decision
// costs less than the lookup. Size and MaxAge must not be negative.
// Default: off.
func WithDenyCache(c DenyCache) Option {
	return optionFunc(func(l *Limiter) error {
		if c.Size < 0 || c.MaxAge < 0 {
			return fmt.Errorf("%w: DenyCache{Size: %d, MaxAge: %v}: neither may be negative", ErrInvalidOption, c.Size, c.MaxAge)
		}
		if c.Size == 0 {
			c.Size = DefaultDenyCacheSize
		}
		if c.MaxAge == 0 {
			c.MaxAge = DefaultDenyCacheMaxAge
		}
		l.deny = newDenyCache(c)
		return nil
	})
}

// denyShards is the number of independently locked parts of a denyCache.
const denyShards = 16

// denyCache remembers the store's denials per key (see WithDenyCache).
type denyCache struct {
	maxAge time.Duration
	grace  time.Duration // how long callers wait for one asking: the Limiter's timeout
	seed   maphash.Seed
	shards [denyShards]denyShard
}

type denyShard struct {
	mu  sync.Mutex
	m   map[string]denial
	max int
}

// denial is a remembered Decision: the store's, at made, for cost under
// plan, to be served until until.
type denial struct {
	plan        *engine.Plan
	cost        int64
	made, until time.Time
	d           Decision

	// asking is set while a caller, having found the denial run out, asks
	// the store again; until askUntil the key's other callers are answered
	// with the denial meanwhile.
	asking   bool
	askUntil time.Time
}

func newDenyCache(c DenyCache) *denyCache {
	dc := &denyCache{maxAge: c.MaxAge, seed: maphash.MakeSeed()}
	per := max(c.Size/denyShards, 1) // at most Size in all, or one per shard
	for i := range dc.shards {
		dc.shards[i].m = make(map[string]denial)
		dc.shards[i].max = per
	}
	return dc
}

func (dc *denyCache) shard(key string) *denyShard {
	return &dc.shards[maphash.Comparable(dc.seed, key)%denyShards] // maphash.String in one call fewer
}

// now returns the time by clock, or the system's when it is nil.
func (dc *denyCache) now(clock Clock) time.Time {
	if clock != nil {
		return clock.Now()
	}
	return time.Now()
}

// get returns the remembered denial of cost under plan for key, its times
// brought to now. When it has run out, the first caller to find it so is
// sent to the store (false), and the key's other callers are answered with
// it until that caller's answer comes (for at most grace; RetryAfter at
// least a millisecond): a hammered key's callers then cost the store one
// call when a denial runs out, not one each.
func (dc *denyCache) get(key string, plan *engine.Plan, cost int64, now time.Time) (Decision, bool) {
	sh := dc.shard(key)
	sh.mu.Lock()
	e, ok := sh.m[key]
	if !ok || e.plan != plan || e.cost != cost {
		sh.mu.Unlock()
		return Decision{}, false
	}
	if !now.Before(e.until) {
		if !e.asking || !now.Before(e.askUntil) {
			e.asking, e.askUntil = true, now.Add(dc.grace)
			sh.m[key] = e
			sh.mu.Unlock()
			return Decision{}, false
		}
	}
	sh.mu.Unlock()
	d := e.d.aged(now.Sub(e.made))
	d.RetryAfter = max(d.RetryAfter, time.Millisecond)
	return d, true
}

// put remembers d, the store's denial of cost under plan for key at now.
func (dc *denyCache) put(key string, plan *engine.Plan, cost int64, d Decision, now time.Time) {
	if d.Allowed || d.Source != FromStore || d.RetryAfter <= 0 {
		return
	}
	conc := false
	d.Each(func(s LimitState) { conc = conc || (!s.Allowed && s.Limit.Algorithm == Concurrency) })
	if conc {
		return
	}
	keep := dc.maxAge
	if d.RetryAfter < keep {
		keep = d.RetryAfter
	}
	d.Source = FromDenyCache
	e := denial{plan: plan, cost: cost, made: now, until: now.Add(keep), d: d}
	sh := dc.shard(key)
	sh.mu.Lock()
	if _, ok := sh.m[key]; !ok && len(sh.m) >= sh.max {
		sh.evict(now)
	}
	sh.m[key] = e
	sh.mu.Unlock()
}

// evict makes room for one entry: it drops the expired entries among a few
// (map order is random), or the first of them when none has expired.
func (sh *denyShard) evict(now time.Time) {
	var first string
	n, dropped := 0, false
	for k, e := range sh.m {
		if n == 0 {
			first = k
		}
		if !now.Before(e.until) {
			delete(sh.m, k)
			dropped = true
		}
		if n++; n == 8 {
			break
		}
	}
	if !dropped {
		delete(sh.m, first)
	}
}

// forget drops what is remembered of key.
func (dc *denyCache) forget(key string) {
	sh := dc.shard(key)
	sh.mu.Lock()
	delete(sh.m, key)
	sh.mu.Unlock()
}

// admitted records that the store admitted a Take of cost for key: usage
// grew, so a remembered denial of another cost has too short a RetryAfter
// now and is dropped. One of the same cost that has run out is left for
// the next caller to ask the store again (see get); one that has not can
// only have been made while this call was on its way (the callers of a
// hammered key), and stands, as the store made it.
func (dc *denyCache) admitted(key string, cost int64) {
	sh := dc.shard(key)
	sh.mu.Lock()
	if e, ok := sh.m[key]; ok {
		if e.cost != cost {
			delete(sh.m, key)
		} else if e.asking {
			e.asking = false
			sh.m[key] = e
		}
	}
	sh.mu.Unlock()
}

// len returns the number of keys remembered.
func (dc *denyCache) len() int {
	n := 0
	for i := range dc.shards {
		sh := &dc.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// aged returns d as it reads elapsed later: every wait shorter by elapsed.
// States are copied: callers own what they are given.
func (d Decision) aged(elapsed time.Duration) Decision {
	less := func(w time.Duration) time.Duration {
		if w == Never {
			return Never
		}
		return max(w-elapsed, 0)
	}
	d.RetryAfter = less(d.RetryAfter)
	d.ResetAfter = less(d.ResetAfter)
	d.EffectiveWindow = less(d.EffectiveWindow)
	if d.States != nil {
		s := make([]LimitState, len(d.States))
		for i, st := range d.States {
			st.RetryAfter = less(st.RetryAfter)
			st.ResetAfter = less(st.ResetAfter)
			st.EffectiveWindow = less(st.EffectiveWindow)
			s[i] = st
		}
		d.States = s
	}
	return d
}

// cached applies op through the deny cache: a remembered denial answers
// a Take or a Peek; an operation that changes the key's state forgets it.
func (l *Limiter) cached(ctx context.Context, op engine.Op, limits []Limit, o *Observation) (Decision, error) {
	if op.Kind == engine.Take || op.Kind == engine.Peek {
		if d, ok := l.deny.get(op.Key, op.Plan, op.Cost, l.deny.now(l.clock)); ok {
			return d, nil
		}
	}
	d, err := l.apply(ctx, op, limits, o)
	switch {
	case err != nil || d.Source != FromStore:
		l.deny.forget(op.Key) // let the next caller ask
	case !d.Allowed && (op.Kind == engine.Take || op.Kind == engine.Peek):
		// Timed from the reply: the store measured RetryAfter at some
		// point of the round trip, so a denial remembered from its start
		// would run out before the store admits (and every caller of a
		// hammered key would ask again at once).
		l.deny.put(op.Key, op.Plan, op.Cost, d, l.deny.now(l.clock))
	case op.Kind == engine.Take:
		l.deny.admitted(op.Key, op.Cost)
	case op.Kind != engine.Peek:
		// A Charge (usage grew), a Refund, a Reset, a Release (it
		// dropped): forget the key.
		l.deny.forget(op.Key)
	}
	return d, err
}
