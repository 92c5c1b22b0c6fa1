package guard

import (
	"context"
	"net/http"
	"slices"
	"sync"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/internal/compare"
	"github.com/tollgate/tollgate/keyfuncs"
)

// A Chain is what one request carries across the Tollgate middlewares it
// crosses (app-wide, group, route; of one adapter, or of several stacked,
// such as nethttp around a gin engine): every limiter state they charged
// for it. With it, stacked middlewares act as one decision:
//
//   - A request that one of them denies, or fails (an unreadable key, a
//     failing store, a cancelled wait, a panicking function), leaves no
//     charge in any of them: the one that stops it refunds what the others
//     took, and they settle nothing afterwards. In dry run (WithDryRun) a
//     middleware refunds only what it took itself, and the request goes
//     on.
//   - A limiter state, that is a Limiter's scope (core.Limiter.Name), its
//     store and a key, is charged at most once per request, however many
//     rules and middlewares apply it: limiters configured alike and
//     stacked, or two rules of one Limiter on one key, count the request
//     once. When they ask different costs, the largest is charged: the
//     first charges its cost, a later one only what its own cost adds.
//   - The rate-limit headers of each middleware describe the whole chain:
//     one item per state, in the order the middlewares ran, so the client
//     sees every policy it is under, each once (see HeadersDraft11).
//
// Adapters keep one Chain per request, inside a value they allocate per
// request anyway or take from a pool of their own (see Keep), and hand it
// to Serve through a ChainWriter; a middleware
// inside another finds the outer one's Chain with FindChain, and uses it
// instead of its own. A Chain is used by one request at a time, by the
// middlewares on its chain, which run one inside the other; it is not safe
// for concurrent use. The zero value is an empty Chain, ready to use.
type Chain struct {
	// s is the state: in use (s.busy) while a middleware serves the
	// request, from statePool, or kept between requests (Keep).
	s *chainState
}

// Keep makes c keep the state it serves a request with, to serve the next
// with it, where a Chain takes one from a shared pool and gives it back
// once its request is over. It is for a Chain inside a value that its
// adapter pools and reuses request after request (as this repository's
// net/http, gin, echo and fiber adapters do): a request then takes one
// object from a pool rather than two. Call it when the value goes back to
// its adapter's pool after its Chain served a request (an idle Chain
// takes its state then), not for a value dropped, which would take its
// state along, nor for one whose Chain only ever serves inside another
// middleware's. The state, about a kilobyte, stays with c while c waits
// in its adapter's pool. A copy of a Chain that keeps its state shares
// it: reset the rest of a pooled value around its Chain, not the Chain
// itself.
func (c *Chain) Keep() {
	if c.s == nil || !c.s.kept { // most calls find it kept, and return
		c.take()
	}
}

// take makes c keep a state: the one it has, or one from statePool.
func (c *Chain) take() {
	if c.s == nil {
		c.s = statePool.Get().(*chainState)
	}
	c.s.kept = true
}

// chainState is what a Chain holds while a request is served. The
// outermost middleware takes it from statePool and gives it back once
// the request is over, so that carrying a Chain costs a request one
// pointer in a value its adapter allocates anyway; a Chain that keeps it
// (Keep) has it emptied instead, for its next request.
type chainState struct {
	entries []entry
	one     [1]entry // storage for the first entry
	stopped bool     // a middleware denied or failed the request (not in dry run)
	// admitted are the adaptive limits that admitted the request: a
	// middleware further in that shares one does not ask it again
	// (adaptive.go).
	admitted []*adaptive.Limiter
	// buf is where the headers' values are built: a buffer on the stack
	// would escape, passed to BytesWriter.SetHeaderBytes.
	buf [128]byte
	// states is the memory of one entry's Decision.States, lent to the
	// first decision of a request on several limits (core's AllowNInto),
	// so that it allocates nothing; lent says it is taken. Nothing refers
	// to it once the request is over: a Denial copies what it keeps.
	states [4]core.LimitState
	lent   bool
	busy   bool // a request is being served with it
	kept   bool // its Chain keeps it between requests (Chain.Keep)
}

var statePool = sync.Pool{New: func() any { return new(chainState) }}

// acquire returns c's state, taking one from statePool when c has none:
// then, or when c keeps its state between requests, own is true, and
// release must give it back.
func (c *Chain) acquire() (s *chainState, own bool) {
	switch {
	case c.s == nil:
		c.s = statePool.Get().(*chainState)
	case c.s.busy:
		return c.s, false
	}
	c.s.busy = true
	return c.s, true
}

// release empties c's state and gives it back to statePool, unless c
// keeps it. Nothing of the request refers to it afterwards: Denials and
// listings copy what they keep. The inline entry is not cleared, which
// costs as much as the rest of a request's bookkeeping: the next
// request's first entry overwrites it, and the pool drops idle states at
// every garbage collection (a kept one goes with its Chain's value).
func (c *Chain) release() {
	s := c.s
	s.entries, s.stopped, s.admitted, s.lent, s.busy = nil, false, s.admitted[:0], false, false
	if !s.kept {
		c.s = nil
		statePool.Put(s)
	}
}

// A ChainWriter is a Writer that carries its request's Chain: every
// adapter of this repository implements it. Serve uses the Chain of a
// ChainWriter, and a fresh one for any other Writer, so that an adapter
// without it still works, alone on the request.
type ChainWriter interface {
	Writer
	// Chain returns the request's Chain: the adapter's own, or the one of
	// an outer middleware found with FindChain. It must not be nil.
	Chain() *Chain
}

// FindChain returns the Chain of the middleware that handed w to the rest
// of the chain: the one w carries (w has a method Chain() *Chain, as the
// http.ResponseWriter the nethttp middleware passes on does), or that a
// writer it wraps carries, found through Unwrap() http.ResponseWriter (the
// convention of http.ResponseController, followed by gin's and echo's
// response writers), up to 16 levels deep; nil when there is none. An
// adapter calls it with the response writer its middleware receives, to
// join the chain of an outer Tollgate middleware, of any adapter.
func FindChain(w http.ResponseWriter) *Chain {
	for range 16 {
		switch x := w.(type) {
		case chainCarrier:
			return x.Chain()
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

type chainCarrier interface{ Chain() *Chain }

// chainOf returns the Chain w carries, or a fresh one.
func chainOf(w Writer) *Chain {
	if cw, ok := w.(chainCarrier); ok {
		if c := cw.Chain(); c != nil {
			return c
		}
	}
	return new(Chain)
}

// entry is one limiter state charged for the request (or denying it).
type entry struct {
	g    *Guard // the middleware whose rule first charged it: errors go to its OnError hook
	lim  *core.Limiter
	key  string
	held int64 // the cost the request holds in the state: charged and not given back
	d    core.Decision
	// limits are the key's limits when d is a FailOpen decision
	// (core.FromFailOpen), which knows none: RateLimit-Policy lists them.
	limits []core.Limit
	// pin is, plus one, the index among its limits of the limit whose
	// RateLimit item an entry shows, whatever its decision's binding
	// limit: for the entry that denied a request, the denying limit (or,
	// for a LeakyBucket delay over the maximum, the queued one), after the
	// refunds. 0 for the binding limit.
	pin int
	// never marks the entry that denied a cost above a limit's capacity:
	// it has no RateLimit item.
	never bool
	// settled reports that a middleware settled the entry after the
	// handler (the innermost one that settles): outer ones leave it.
	settled bool
	// leases are the acquisitions the request holds on the state's
	// Concurrency limits (core.Decision.Lease), not released yet.
	leases []int64
	// took and more are the charges whose units make up held, oldest
	// first: a refund gives units back to where each charge put them (a
	// core.Receipt), newest first. Most entries have one charge.
	took taken
	more []taken
}

// taken is a charge an entry holds units of: its receipt, and its units
// not given back.
type taken struct {
	rc   core.Receipt
	left int64
}

// hold records that e holds n more units, charged by d. It takes the
// Decision, not its Receipt, so that the receipt reaches the entry
// through one temporary, not two: a Receipt is seven words, which the
// compiler builds in memory, and each copy of it through a temporary
// reads back stores just made, 16 bytes at a time, and waits for them to
// reach the cache. The one left is the compiler's (the entry is on the
// heap and a Receipt holds a pointer): perf puts about half of hold's
// samples on its copy, about 1% of a net/http request's.
func (e *entry) hold(d *core.Decision, n int64) {
	e.held += n
	if e.took.left == 0 && len(e.more) == 0 {
		e.took.rc, e.took.left = d.Receipt(), n
		return
	}
	e.more = append(e.more, taken{d.Receipt(), n})
}

// add appends an entry of g's for lim's state of key, and returns its
// index. It fills the entry in place, an entry being large, but for its
// Decision: the caller decides into it (Limiter.AllowNInto sets all of
// it), and removes the entry when that fails.
func (c *chainState) add(g *Guard, lim *core.Limiter, key string) int {
	if c.entries == nil {
		c.entries = c.one[:1]
	} else {
		c.entries = append(c.entries, entry{})
	}
	at := len(c.entries) - 1
	e := &c.entries[at]
	e.g, e.lim, e.key = g, lim, key
	e.held, e.limits, e.pin, e.never, e.settled, e.leases = 0, nil, 0, false, false, nil
	e.took, e.more = taken{}, nil
	return at
}

// lends reports whether d's States are in c's memory (c.states).
func (c *chainState) lends(d *core.Decision) bool {
	return len(d.States) > 0 && &d.States[0] == &c.states[0]
}

// find returns the index of the entry of lim's state for key, or -1.
func (c *chainState) find(lim *core.Limiter, key string) int {
	for i := range c.entries {
		e := &c.entries[i]
		if e.key == key && (e.lim == lim || sameState(e.lim, lim)) {
			return i
		}
	}
	return -1
}

// sameState reports whether a and b, distinct Limiters, keep a key's state
// in the same place: the same scope on the same store.
func sameState(a, b *core.Limiter) bool {
	if a.Scope() != b.Scope() {
		return false
	}
	return compare.Equal(a.Store(), b.Store()) // a store value that cannot be compared is not known to be the same
}

// charge is what one Serve call added to an entry.
type charge struct {
	at    int   // the entry
	n     int64 // the units
	lease int64 // the acquisition on the entry's Concurrency limits, or 0
}

// numLimits returns the number of limits e lists.
func (e *entry) numLimits() int {
	switch {
	case e.d.Source == core.FromFailOpen:
		return len(e.limits)
	case e.d.States == nil:
		return 1
	}
	return len(e.d.States)
}

// limit returns e's j-th limit.
func (e *entry) limit(j int) *core.Limit {
	switch {
	case e.d.Source == core.FromFailOpen:
		return &e.limits[j]
	case e.d.States == nil:
		return &e.d.Limit
	}
	return &e.d.States[j].Limit
}

// hidden reports whether e has no RateLimit item: a FailOpen decision
// knows no numbers, and a cost above capacity must not be invited back.
func (e *entry) hidden() bool { return e.never || e.d.Source == core.FromFailOpen }

// item returns the index of e's binding limit among its limits, and that
// limit's state: the denying limit, the queued one, or the one closest to
// exhaustion.
func (e *entry) item() (int, item) {
	if e.d.States == nil {
		return 0, item{quota: e.d.Limit.Quota, remaining: e.d.Remaining, window: e.d.EffectiveWindow}
	}
	j := e.pin - 1
	if j < 0 || j >= len(e.d.States) {
		j = indexOf(&e.d)
	}
	s := &e.d.States[j]
	return j, item{quota: s.Limit.Quota, remaining: s.Remaining, window: s.EffectiveWindow}
}

// indexOf returns the index of d's binding limit among its states.
func indexOf(d *core.Decision) int {
	for j := range d.States {
		if d.States[j].Limit == d.Limit {
			return j
		}
	}
	return 0
}

// adjust charges (diff > 0) or refunds (diff < 0) e. A refund gives units
// back to where their charges put them, the newest charge's first (see
// core.Limiter.RefundTo): a request that ends after a window's boundary
// never makes room in the new window for units it took in the old one.
// Headers written after it show the state after the change.
func (e *entry) adjust(ctx context.Context, diff int64) error {
	var d core.Decision
	var err error
	if diff > 0 {
		if d, err = e.lim.Charge(ctx, e.key, diff); err != nil {
			return &guardError{ErrLimiter, err}
		}
		e.hold(&d, diff)
	} else {
		asked := false
		for n, i := -diff, len(e.more); n > 0 && i >= 0; i-- {
			t := &e.took
			if i > 0 {
				t = &e.more[i-1]
			}
			k := min(t.left, n)
			if k <= 0 {
				continue
			}
			if t.rc.Charged() { // else nothing was charged (FailOpen): nothing to give back
				if d, err = e.lim.RefundTo(ctx, e.key, t.rc, k); err != nil {
					return &guardError{ErrLimiter, err}
				}
				asked = true
			}
			t.left, n, e.held = t.left-k, n-k, e.held-k
		}
		if !asked {
			return nil
		}
	}
	if d.Source != e.d.Source {
		return nil // numbers of another store, or none (FailOpen)
	}
	e.d.Remaining, e.d.ResetAfter, e.d.EffectiveWindow, e.d.States = d.Remaining, d.ResetAfter, d.EffectiveWindow, d.States
	e.d.Limit = d.Limit
	return nil
}

// hookFailures reports the failures of refunds and charges to the OnError
// hooks of the entries' middlewares, once every entry is adjusted, so that
// a hook that panics leaves no entry behind.
type failures []failure

type failure struct {
	g   *Guard
	err error
}

func (fs failures) report(r keyfuncs.Request) {
	for _, f := range fs {
		if f.g.hookError != nil {
			f.g.hookError(r, f.err)
		}
	}
}

// stop gives back everything the request holds on the chain, and marks it
// stopped: a middleware denied or failed it, and no other settles it.
// Units in flight (Concurrency limits) are released; a LeakyBucket gives a
// turn back only while it is its queue's last (see core.Receipt). It runs
// on the way out, so it ignores the request's cancellation.
func (c *chainState) stop(r keyfuncs.Request) {
	c.stopped = true
	ctx := context.WithoutCancel(r.Context())
	var fs failures
	for i := range c.entries {
		e := &c.entries[i]
		for _, l := range e.leases {
			if _, err := e.lim.Release(ctx, e.key, l); err != nil {
				fs = append(fs, failure{e.g, &guardError{ErrLimiter, err}})
			}
		}
		e.leases = e.leases[:0]
		if e.held <= 0 {
			continue
		}
		if err := e.adjust(ctx, -e.held); err != nil {
			fs = append(fs, failure{e.g, err})
		}
	}
	fs.report(r)
}

// releaseAll ends the acquisitions of charges (a middleware's own, once
// its handler returned): the units they hold on Concurrency limits are in
// flight no more. It runs on the way out, under the request's context
// reqCtx (read before the handler) without its cancellation.
func (c *chainState) releaseAll(reqCtx context.Context, r keyfuncs.Request, charges []charge) {
	ctx := context.WithoutCancel(reqCtx)
	var fs failures
	for _, ch := range charges {
		if ch.lease == 0 {
			continue
		}
		c.entries[ch.at].dropLease(ctx, ch.lease, &fs)
	}
	fs.report(r)
}

// dropLease releases lease, if e still holds it, and forgets it; a
// failure to release goes to fs.
func (e *entry) dropLease(ctx context.Context, lease int64, fs *failures) {
	i := slices.Index(e.leases, lease)
	if i < 0 {
		return
	}
	e.leases = slices.Delete(e.leases, i, i+1)
	if _, err := e.lim.Release(ctx, e.key, lease); err != nil {
		*fs = append(*fs, failure{e.g, &guardError{ErrLimiter, err}})
	}
}

// holds reports whether charges acquired units on Concurrency limits.
func holds(charges []charge) bool {
	for _, ch := range charges {
		if ch.lease != 0 {
			return true
		}
	}
	return false
}

// undo gives back what one Serve call charged (in dry run, where the
// request goes on and other middlewares keep theirs).
func (c *chainState) undo(r keyfuncs.Request, charges []charge) {
	ctx := context.WithoutCancel(r.Context())
	var fs failures
	for _, ch := range charges {
		e := &c.entries[ch.at]
		if ch.lease != 0 {
			e.dropLease(ctx, ch.lease, &fs)
		}
		if n := min(ch.n, e.held); n > 0 {
			if err := e.adjust(ctx, -n); err != nil {
				fs = append(fs, failure{e.g, err})
			}
		}
	}
	fs.report(r)
}
