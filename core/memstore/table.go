package memstore

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
type table struct {
	slots []tslot // a power of two of them, at most 3/4 in use; nil before the first insert
	n     int     // slots in use
	shift uint    // 64 − log2(len(slots))
}

// A tslot is a key's slot: empty when e is nil. Its key is e.key.
type tslot struct {
	h uint64
	e *entry
}

// minTable is the fewest slots a table has once it holds a key.
const minTable = 16

// home returns the slot where a key of hash h starts probing: the top bits
// of h times 2^64/φ, which spreads hashes whose low bits (the shard's
// index) are all alike.
func (t *table) home(h uint64) int { return int((h * 0x9E3779B97F4A7C15) >> t.shift) }

// get returns the entry of key, of hash h, or nil.
func (t *table) get(h uint64, key string) *entry {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.e == nil {
			return nil
		}
		if s.h == h && s.e.key == key {
			return s.e
		}
	}
}

// set makes e the entry of its key, e.key, of hash h, adding the key if it
// is new. Only an added key can make the table grow.
func (t *table) set(h uint64, e *entry) {
	if t.n > 0 {
		mask := len(t.slots) - 1
		for i := t.home(h); t.slots[i].e != nil; i = (i + 1) & mask {
			if s := &t.slots[i]; s.h == h && s.e.key == e.key {
				s.e = e
				return
			}
		}
	}
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.insert(tslot{h, e})
}

// insert puts s, whose key the table does not hold, in the first empty
// slot from its home. The table has room.
func (t *table) insert(s tslot) {
	mask := len(t.slots) - 1
	i := t.home(s.h)
	for t.slots[i].e != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = s
	t.n++
}

// del removes key, of hash h, if present.
func (t *table) del(h uint64, key string) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.home(h)
	for ; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.e == nil {
			return
		}
		if s.h == h && s.e.key == key {
			break
		}
	}
	// Shift back each following slot of the run that may move into the
	// hole: one whose home is not cyclically within (hole, slot].
	for j := (i + 1) & mask; t.slots[j].e != nil; j = (j + 1) & mask {
		k := t.home(t.slots[j].h)
		if i <= j && i < k && k <= j || i > j && (i < k || k <= j) {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = tslot{}
	t.n--
}

// grow doubles the table (or makes its first minTable slots).
func (t *table) grow() {
	old := t.slots
	size := max(minTable, 2*len(old))
	t.slots, t.n = make([]tslot, size), 0
	t.shift = 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
	for _, s := range old {
		if s.e != nil {
			t.insert(s) // keys are unique, and the new table has room
		}
	}
}
