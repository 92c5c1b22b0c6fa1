package memstore

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// A table maps a shard's keys to their entries (the head of each key's
// chain of scopes). It is an open-addressing hash table with linear
// probing, keyed by the hash that chose the shard: a lookup hashes its key
// once, where a Go map would hash it a second time with a seed of its own.
// Each slot keeps its key's hash beside the entry, 16 bytes a slot: a
// lookup reads its slots' line, and when the hash matches, the entry's key
// (entry.key, in the entry's second line, its bytes in the same object for
// a short key), and then the decision reads the entry's first line. The
// key is the entry's: a table holds no key of its own.
//
// Deletion shifts the slots after the one deleted back (no tombstones), so
// that a table in which keys come and go does not fill with them. Like a
// Go map, a table does not shrink: its size follows the most keys its
// shard held, which the store's key bound (WithMaxKeys) caps.
//
// The shard's lock guards every change. A lookup may also run without it
// (get): the slots are read and written atomically, and the array a
// lookup probes is published whole. Such a lookup may miss a key that a
// concurrent change is moving, or find an entry that is being removed:
// its caller asks again under the lock when it finds nothing, and an
// entry says when it was removed (entry.dead). What it finds is always an
// entry whose key is the one asked for.
type table struct {
	a atomic.Pointer[slots] // nil before the first insert
	n int                   // slots in use
}

// slots is a table's array: a power of two of slots, at most 3/4 in use.
type slots struct {
	s     []tslot
	shift uint // 64 − log2(len(s))
}

// A tslot is a key's slot: empty when e is nil. Its key is e.key.
type tslot struct {
	h atomic.Uint64
	e atomic.Pointer[entry]
}

// minTable is the fewest slots a table has once it holds a key.
const minTable = 16

// home returns the slot where a key of hash h starts probing: the top bits
// of h times 2^64/φ, which spreads hashes whose low bits (the shard's
// index) are all alike. The shift is at most 60 (minTable): masked to
// 6 bits, it spares the check the compiler makes for a shift of 64 or
// more.
func (a *slots) home(h uint64) int { return int((h * 0x9E3779B97F4A7C15) >> (a.shift & 63)) }

// get returns the entry of key, of hash h, or nil. Under the shard's
// lock it is exact. Without it, it may miss a key that a concurrent
// change moves, and may return an entry being removed (entry.dead).
//
// A key of 4 to 16 bytes (most keys: an IPv4 address, a short identifier)
// is compared in line, as two words that overlap (sameWords), and get
// then makes no call: it keeps its arguments in registers, where a call
// of the runtime's memequal on a probe would have them saved to the stack
// on every lookup. Other keys go through getAny.
func (t *table) get(h uint64, key string) *entry {
	n := len(key)
	if n < 4 || n > 16 {
		return t.getAny(h, key)
	}
	a := t.a.Load()
	if a == nil {
		return nil
	}
	q := unsafe.Pointer(unsafe.StringData(key))
	mask := len(a.s) - 1
	for i, probes := a.home(h), 0; probes < len(a.s); i, probes = (i+1)&mask, probes+1 {
		s := &a.s[i]
		e := s.e.Load()
		if e == nil {
			return nil
		}
		if s.h.Load() != h || len(e.key) != n {
			continue
		}
		if p := unsafe.Pointer(unsafe.StringData(e.key)); n >= 8 && sameWords8(p, q, n-8) || n < 8 && sameWords4(p, q, n-4) {
			return e
		}
	}
	return nil
}

// getAny is get for a key of any length.
func (t *table) getAny(h uint64, key string) *entry {
	a := t.a.Load()
	if a == nil {
		return nil
	}
	mask := len(a.s) - 1
	for i, n := a.home(h), 0; n < len(a.s); i, n = (i+1)&mask, n+1 {
		s := &a.s[i]
		e := s.e.Load()
		if e == nil {
			return nil
		}
		if s.h.Load() == h && e.key == key {
			return e
		}
	}
	return nil
}

// sameWords8 reports whether the bytes at p and q are equal up to last+8,
// 0 ≤ last ≤ 8, by comparing their first 8 bytes and the 8 from last,
// which overlap when last is less than 8. sameWords4 is the same with
// words of 4 bytes, for 0 ≤ last ≤ 4. The words are read through array
// pointers: no bounds checks, and one load each on amd64 and arm64.
func sameWords8(p, q unsafe.Pointer, last int) bool {
	return word8(p) == word8(q) && word8(unsafe.Add(p, last)) == word8(unsafe.Add(q, last))
}

func sameWords4(p, q unsafe.Pointer, last int) bool {
	return word4(p) == word4(q) && word4(unsafe.Add(p, last)) == word4(unsafe.Add(q, last))
}

// word8 and word4 return the 8 and 4 bytes at p.
func word8(p unsafe.Pointer) uint64 { return binary.LittleEndian.Uint64((*[8]byte)(p)[:]) }
func word4(p unsafe.Pointer) uint32 { return binary.LittleEndian.Uint32((*[4]byte)(p)[:]) }

// set makes e the entry of its key, e.key, of hash h, adding the key if it
// is new. Only an added key can make the table grow. The shard's lock is
// held.
func (t *table) set(h uint64, e *entry) {
	if a := t.a.Load(); a != nil {
		mask := len(a.s) - 1
		for i := a.home(h); a.s[i].e.Load() != nil; i = (i + 1) & mask {
			if s := &a.s[i]; s.h.Load() == h && s.e.Load().key == e.key {
				s.e.Store(e)
				return
			}
		}
	}
	if a := t.a.Load(); a == nil || (t.n+1)*4 > len(a.s)*3 {
		t.grow()
	}
	t.insert(t.a.Load(), h, e)
}

// insert puts e, of hash h, whose key a does not hold, in the first empty
// slot of a from its home. a has room. The shard's lock is held.
func (t *table) insert(a *slots, h uint64, e *entry) {
	mask := len(a.s) - 1
	i := a.home(h)
	for a.s[i].e.Load() != nil {
		i = (i + 1) & mask
	}
	a.s[i].h.Store(h) // the hash first: a lookup that sees the entry checks its key anyway
	a.s[i].e.Store(e)
	t.n++
}

// del removes key, of hash h, if present. The shard's lock is held.
func (t *table) del(h uint64, key string) {
	a := t.a.Load()
	if a == nil {
		return
	}
	mask := len(a.s) - 1
	i := a.home(h)
	for ; ; i = (i + 1) & mask {
		e := a.s[i].e.Load()
		if e == nil {
			return
		}
		if a.s[i].h.Load() == h && e.key == key {
			break
		}
	}
	// Shift back each following slot of the run that may move into the
	// hole: one whose home is not cyclically within (hole, slot].
	for j := (i + 1) & mask; a.s[j].e.Load() != nil; j = (j + 1) & mask {
		k := a.home(a.s[j].h.Load())
		if i <= j && i < k && k <= j || i > j && (i < k || k <= j) {
			continue
		}
		a.s[i].h.Store(a.s[j].h.Load())
		a.s[i].e.Store(a.s[j].e.Load())
		i = j
	}
	a.s[i].e.Store(nil)
	a.s[i].h.Store(0)
	t.n--
}

// grow doubles the table (or makes its first minTable slots), and
// publishes the new array once it holds every key. The shard's lock is
// held.
func (t *table) grow() {
	old := t.a.Load()
	size := minTable
	if old != nil {
		size = 2 * len(old.s)
	}
	a := &slots{s: make([]tslot, size), shift: 64}
	for s := size; s > 1; s >>= 1 {
		a.shift--
	}
	t.n = 0
	if old != nil {
		for i := range old.s {
			if e := old.s[i].e.Load(); e != nil {
				t.insert(a, old.s[i].h.Load(), e) // keys are unique, and the new table has room
			}
		}
	}
	t.a.Store(a)
}
