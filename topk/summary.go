package topk

import (
	"crypto/sha256"
	"math"
	"strings"
)

// A digest is the SHA-256 of a key longer than the tracker's bound.
type digest = [sha256.Size]byte

// summary is one Space-Saving sketch (Metwally, Agrawal and El Abbadi,
// "Efficient Computation of Frequent and Top-k Elements in Data Streams",
// 2005) of at most m counters, weighted: add(key, n) counts n occurrences.
//
// Counters sit in slots whose index never changes while they are used, so
// the maps point at slots; a min-heap of slot indices orders them by count.
// A known key costs a map lookup and a sift down the heap, O(log m), and
// allocates nothing. An unknown key takes a free slot, or, when all m are
// used, the slot of the smallest count min, starting at min + n with error
// min: the classic invariants follow, for every key with true count f,
//
//	counted:   f ≤ count and count − err ≤ f
//	uncounted: f ≤ floor
//
// where floor is the count of the last key to lose its counter (0 until
// one does); as err is the floor of its time, err ≤ floor; as the counts
// sum to total and floor ≤ min, floor ≤ total/m.
//
// Keys longer than the bound are counted under their digest, in a map of
// their own: no short key, whatever its bytes, shares a counter with a long
// one.
//
// A summary is not safe for concurrent use: the Tracker locks it.
type summary struct {
	slots []slot  // len ≤ m
	heap  []int32 // slot indices, a min-heap on count
	short map[string]int32
	long  map[digest]int32
	total int64 // the sum of every n added, saturating
	floor int64 // the count of the last key to lose its counter
	m     int
}

// A slot is one counter.
type slot struct {
	key   string // the key, or the 32 bytes of a long key's digest
	count int64  // an upper bound of the key's count
	err   int64  // how much count may exceed the true count
	pos   int32  // index of this slot in heap
	long  bool   // key is a digest
}

func newSummary(m int) *summary {
	return &summary{
		slots: make([]slot, 0, m),
		heap:  make([]int32, 0, m),
		short: make(map[string]int32, m),
		long:  make(map[digest]int32),
		m:     m,
	}
}

// addShort counts n (> 0) occurrences of key, a key no longer than the
// bound. key is copied when it takes a counter.
func (s *summary) addShort(key string, n int64) {
	s.total = satAdd(s.total, n)
	if i, ok := s.short[key]; ok {
		s.bump(i, n)
		return
	}
	i := s.take(n)
	s.slots[i].key, s.slots[i].long = strings.Clone(key), false
	s.short[s.slots[i].key] = i
}

// addLong counts n (> 0) occurrences of the long key whose digest is d.
func (s *summary) addLong(d *digest, n int64) {
	s.total = satAdd(s.total, n)
	if i, ok := s.long[*d]; ok {
		s.bump(i, n)
		return
	}
	i := s.take(n)
	s.slots[i].key, s.slots[i].long = string(d[:]), true
	s.long[*d] = i
}

// bump adds n to the count of slot i.
func (s *summary) bump(i int32, n int64) {
	s.slots[i].count = satAdd(s.slots[i].count, n)
	s.down(int(s.slots[i].pos))
}

// take returns the slot of a key that has none, counting n for it: a free
// slot, or the smallest counter's, whose key it forgets. The caller sets
// the slot's key and maps it.
func (s *summary) take(n int64) int32 {
	if len(s.slots) < s.m {
		i := int32(len(s.slots))
		s.slots = append(s.slots, slot{count: n, pos: int32(len(s.heap))})
		s.heap = append(s.heap, i)
		s.up(len(s.heap) - 1)
		return i
	}
	i := s.heap[0]
	sl := &s.slots[i]
	if sl.long {
		var d digest
		copy(d[:], sl.key)
		delete(s.long, d)
	} else {
		delete(s.short, sl.key)
	}
	s.floor = sl.count
	sl.err = sl.count
	sl.count = satAdd(sl.count, n)
	s.down(0)
	return i
}

// reset forgets every key, keeping the memory.
func (s *summary) reset() {
	clear(s.slots) // drop the keys' strings
	s.slots, s.heap = s.slots[:0], s.heap[:0]
	clear(s.short)
	clear(s.long)
	s.total, s.floor = 0, 0
}

func (s *summary) less(a, b int) bool {
	return s.slots[s.heap[a]].count < s.slots[s.heap[b]].count
}

func (s *summary) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.slots[s.heap[a]].pos = int32(a)
	s.slots[s.heap[b]].pos = int32(b)
}

func (s *summary) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !s.less(j, p) {
			return
		}
		s.swap(j, p)
		j = p
	}
}

func (s *summary) down(j int) {
	n := len(s.heap)
	for {
		c := 2*j + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && s.less(r, c) {
			c = r
		}
		if !s.less(c, j) {
			return
		}
		s.swap(j, c)
		j = c
	}
}

// satAdd returns a + b for b ≥ 0, or math.MaxInt64 when that overflows.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
