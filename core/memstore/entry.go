package memstore

import (
	"sync"
	"unsafe"

	"github.com/tollgate/tollgate/core/engine"
)

// entry holds one key's states, one per limit layout (engine.State.Ident):
// limiters with different limits may share a key, as Redis keys are per
// key and layout. The states of the last operation's limits come first,
// in order, and plan is that operation's plan, so that the next operation
// of the same plan runs Step on them directly.
//
// Most keys have one state, of a plan of one limit: the entry is then
// solo, and that state is one[0]. A key of several states keeps them in
// aux instead, with the numbers of the limits that last stepped each.
//
// An entry of a key longer than maxKeyLen is stored under the key's digest
// with hashed set, and found only by keys that are hashed too: a short key
// equal to a digest is another key.
type entry struct {
	// What a decision of one limit on an existing key reads comes first,
	// in the first 64 bytes, one cache line (see newEntry): over many
	// keys, each line it touches is a cache miss. The lookup before it
	// reads the second line, where the key's header lies, with the key's
	// bytes after it for a key of up to 16 bytes.
	plan    *engine.Plan // its Scope is the entry's
	expires int64        // µs; after it every state equals a fresh one
	slot    int32        // index in the shard's heap (the shard's lock)
	hashed  bool         // the table key is the SHA-256 digest of a long key
	solo    bool         // the key's only state is one[0], of plan's single limit
	dead    bool         // removed from its shard: found by a lookup without the lock, it is asked again with it
	// mu guards the states, plan, solo, expires and dead (see the locking
	// in memstore.go): a decision on an existing key takes it and not its
	// shard's lock.
	mu sync.Mutex
	// one is a solo entry's state: its Ident, A, B and C in the first
	// line, its Log (which the algorithms without logs leave alone) in the
	// second.
	one [1]engine.State
	aux *aux   // nil but for an entry of several states, or a key of several scopes
	key string // the table key (see newEntry), for lookups, removal and eviction
}

// aux is what few entries need: the states of an entry that is not solo,
// and the entry of another scope of the same key.
type aux struct {
	next *entry // the shard's lock
	layouts
}

// layouts is what an entry of several states keeps: the states, the
// numbers of the limit that last stepped each (sizes[i] for states[i]), and
// how many of them, first, are the last operation's.
type layouts struct {
	states []engine.State
	sizes  []size
	n      int
}

// next returns the entry of the key's next scope, or nil.
func (e *entry) next() *entry {
	if e.aux == nil {
		return nil
	}
	return e.aux.next
}

// setNext makes n the entry of the key's next scope.
func (e *entry) setNext(n *entry) {
	if e.aux == nil {
		if n == nil {
			return
		}
		e.aux = new(aux)
	}
	e.aux.next = n
}

// An entry and its key's bytes are one allocation when the key is short
// (keyed16, keyed80): a lookup compares the key in the entry it then
// reads, and a key costs no object of its own. Both are size classes whose
// objects are 64-byte aligned (128 and 192 bytes), so that an entry's
// first 64 bytes are one cache line.
type (
	keyed16 struct {
		e entry
		b [16]byte
	}
	keyed80 struct {
		e entry
		b [80]byte
	}
)

// newEntry returns an entry holding a copy of key, which does not share
// memory with the caller's string (which may alias a reused request
// buffer, as fasthttp's do).
func newEntry(key string) *entry {
	if len(key) > 16 && len(key) <= 80 {
		k := new(keyed80)
		k.e.key = keyIn(k.b[:], key)
		return &k.e
	}
	k := new(keyed16) // a longer key apart, the entry still aligned
	if len(key) <= 16 {
		k.e.key = keyIn(k.b[:], key)
	} else {
		k.e.key = keyIn(make([]byte, len(key)), key)
	}
	return &k.e
}

// keyIn returns key copied into b, which is at least as long and is
// written once, here, and never again: the string is immutable, as Go
// requires.
func keyIn(b []byte, key string) string {
	if len(key) == 0 {
		return ""
	}
	return unsafe.String(&b[0], copy(b, key))
}

// states returns the states of e's plan, in the order of its limits: the
// first of e.all(). e.mu is held; a lookup without the shard's lock may
// read e.aux here: an entry that is not solo got it from hold, with e.mu
// held, and it is never replaced (setNext makes one only for an entry not
// yet in the table).
func (e *entry) states() []engine.State {
	if e.solo {
		return e.one[:]
	}
	return e.aux.states[:e.aux.n]
}

// all returns every state of e, the last operation's first.
func (e *entry) all() []engine.State {
	if e.solo {
		return e.one[:]
	}
	return e.aux.states
}

// size returns the numbers of the limit that last stepped e.all()[i].
func (e *entry) size(i int) size {
	if e.solo {
		l := &e.plan.Limits[0]
		return size{l.Quota, l.Capacity}
	}
	return e.aux.sizes[i]
}

// holdOne makes st e's only state, of e.plan's single limit.
func (e *entry) holdOne(st engine.State) {
	e.one[0], e.solo = st, true
	if e.aux != nil {
		e.aux.layouts = layouts{}
	}
}

// hold makes states e's states, the first n of them the last operation's
// (of e.plan), with the numbers sizes of their limits: e is no longer solo.
func (e *entry) hold(states []engine.State, sizes []size, n int) {
	e.one[0], e.solo = engine.State{}, false
	if e.aux == nil {
		e.aux = new(aux)
	}
	e.aux.layouts = layouts{states: states, sizes: sizes, n: n}
}
