package memstore

import (
	"iter"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// The table against a Go map, through random inserts, replacements and
// deletions, with hashes drawn from a few values so that runs of
// colliding keys form and are shifted back across the table's end.
func TestTableMatchesAMap(t *testing.T) {
	for _, hashes := range []uint64{3, 50, 1 << 62} {
		r := rand.New(rand.NewPCG(1, hashes))
		var tb table
		model := map[string]*entry{}
		// Keys of 1 to 20 bytes: get compares those of 4 to 16 in line.
		key := func(n int) string { return strings.Repeat("k", n%18) + strconv.Itoa(n) }
		hashOf := map[string]uint64{}
		hash := func(k string) uint64 { return hashOf[k] }
		for n := range 350 { // 300 to 349: keys never set, of hashes that are
			hashOf[key(n)] = uint64(n) % hashes * 0x51_7cc1_b727_220a // spread over the slots, but equal for equal n % hashes
		}
		for i := range 5_000 {
			k := key(r.IntN(300))
			switch r.IntN(3) {
			case 0, 1:
				e := &entry{key: k}
				tb.set(hash(k), e)
				model[k] = e
			case 2:
				tb.del(hash(k), k)
				delete(model, k)
			}
			if tb.n != len(model) {
				t.Fatalf("hashes %d, step %d: table holds %d keys, want %d", hashes, i, tb.n, len(model))
			}
			if i%97 == 0 || hashes == 3 {
				for k, e := range model {
					if got := tb.get(hash(k), k); got != e {
						t.Fatalf("hashes %d, step %d: get(%q) = %p, want %p", hashes, i, k, got, e)
					}
				}
				seen := 0
				for k, e := range tb.all() {
					if model[k] != e {
						t.Fatalf("hashes %d, step %d: all yields %q → %p, want %p", hashes, i, k, e, model[k])
					}
					seen++
				}
				if seen != len(model) {
					t.Fatalf("hashes %d, step %d: all yields %d keys, want %d", hashes, i, seen, len(model))
				}
			}
			if k2 := key(300 + r.IntN(50)); tb.get(hash(k2), k2) != nil {
				t.Fatalf("hashes %d, step %d: get(%q) found a key never set", hashes, i, k2)
			}
		}
		if tb.size()*3 < tb.n*4 {
			t.Errorf("hashes %d: %d keys in %d slots: more than 3/4 in use", hashes, tb.n, tb.size())
		}
	}
}

// Shards sit on cache lines of their own.
func TestShardIsTwoCacheLines(t *testing.T) {
	if size := unsafe.Sizeof(shard{}); size != 128 {
		t.Errorf("a shard is %d bytes, want 128", size)
	}
}

// Replacing a key's entry (a chain's new head) takes no slot: the table
// does not grow for it, even when full up to its bound.
func TestTableReplacingDoesNotGrow(t *testing.T) {
	var tb table
	for i := range 12 { // 12 of 16 slots: the most before growing
		tb.set(uint64(i)*0x9E37_79B9_7F4A_7C15, &entry{key: strconv.Itoa(i)})
	}
	if tb.size() != 16 {
		t.Fatalf("12 keys in %d slots, want 16", tb.size())
	}
	e := &entry{key: "0"}
	tb.set(0, e)
	if tb.size() != 16 || tb.n != 12 || tb.get(0, "0") != e {
		t.Errorf("after replacing a key: %d keys in %d slots, entry replaced %v; want 12 in 16, true", tb.n, tb.size(), tb.get(0, "0") == e)
	}
}

// all yields every key of t and its entry, in no particular order, for the
// tests. The table must not change while it runs.
func (t *table) all() iter.Seq2[string, *entry] {
	return func(yield func(string, *entry) bool) {
		a := t.a.Load()
		if a == nil {
			return
		}
		for i := range a.s {
			if e := a.s[i].e.Load(); e != nil && !yield(e.key, e) {
				return
			}
		}
	}
}

// size returns the number of slots of t.
func (t *table) size() int {
	if a := t.a.Load(); a != nil {
		return len(a.s)
	}
	return 0
}

// A lookup finds a key only by its whole bytes, for keys of every length
// around the words get compares in line (0 to 40 bytes): never a key of
// the same hash that differs in one byte, or in length.
func TestGetComparesWholeKeys(t *testing.T) {
	const h = 0x51_7cc1_b727_220a // one hash for every key: only the bytes tell them apart
	for n := range 41 {
		a := make([]byte, n)
		for i := range a {
			a[i] = byte('a' + i%26)
		}
		var tb table
		e := &entry{key: string(a)}
		tb.set(h, e)
		if got := tb.get(h, string(a)); got != e { // equal bytes in other memory
			t.Errorf("get(%q) = %p, want its entry %p", a, got, e)
		}
		for i := range n {
			b := append([]byte(nil), a...)
			b[i] ^= 0x80
			if got := tb.get(h, string(b)); got != nil {
				t.Errorf("get(%q) found %q's entry: they differ at byte %d", b, a, i)
			}
		}
		if n > 0 && tb.get(h, string(a[:n-1])) != nil {
			t.Errorf("get(%q) found %q's entry: their lengths differ", a[:n-1], a)
		}
	}
}
