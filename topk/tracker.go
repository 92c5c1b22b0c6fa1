package topk

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tollgate/tollgate/core"
)

// A Tracker counts denials per key and reports the most denied keys, in
// memory bounded by its capacity whatever the number of distinct keys. It
// is safe for concurrent use; its zero value is not usable: call New.
type Tracker struct {
	mu    sync.Mutex
	cur   *summary
	prev  *summary  // the previous window; nil without windows
	start time.Time // start of cur's window
	since time.Time // New or the last Reset

	capacity  int
	window    time.Duration
	maxKeyLen int
	weighted  bool
	clock     core.Clock
}

// New returns a Tracker configured by opts. An invalid option makes it
// return an error wrapping ErrInvalidOption that names the option.
func New(opts ...Option) (*Tracker, error) {
	c := config{
		capacity:  DefaultCapacity,
		window:    DefaultWindow,
		maxKeyLen: DefaultMaxKeyLen,
		clock:     core.SystemClock(),
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	t := &Tracker{
		cur:       newSummary(c.capacity),
		capacity:  c.capacity,
		window:    c.window,
		maxKeyLen: c.maxKeyLen,
		weighted:  c.weighted,
		clock:     c.clock,
	}
	if c.window > 0 {
		t.prev = newSummary(c.capacity)
	}
	t.start = c.clock.Now()
	t.since = t.start
	return t, nil
}

// Denied counts a denial of key that cost cost: as 1, or as cost with
// WithCostWeight. It is the method an observer of denials calls; OnDenied
// calls it for the guard's hook.
func (t *Tracker) Denied(key string, cost int64) {
	if !t.weighted {
		cost = 1
	}
	t.Add(key, cost)
}

// Add counts n occurrences of key; n ≤ 0 counts nothing. It takes the
// tracker's lock for O(log m) work, and allocates only when key takes a
// counter (a copy of the key, or its digest).
func (t *Tracker) Add(key string, n int64) {
	if n <= 0 {
		return
	}
	var now time.Time
	if t.window > 0 {
		now = t.clock.Now()
	}
	if len(key) > t.maxKeyLen {
		d := sha256.Sum256(unsafe.Slice(unsafe.StringData(key), len(key))) // read only: no copy
		t.mu.Lock()
		t.rotate(now)
		t.cur.addLong(&d, n)
		t.mu.Unlock()
		return
	}
	t.mu.Lock()
	t.rotate(now)
	t.cur.addShort(key, n)
	t.mu.Unlock()
}

// rotate starts the window now falls in: the current window becomes the
// previous one if now is in the next window, and both are forgotten if it
// is later still. t.mu must be held.
func (t *Tracker) rotate(now time.Time) {
	if t.window <= 0 {
		return
	}
	e := now.Sub(t.start)
	if e < t.window {
		return
	}
	k := e / t.window
	if k == 1 {
		t.prev, t.cur = t.cur, t.prev
	} else {
		t.prev.reset()
	}
	t.cur.reset()
	t.start = t.start.Add(k * t.window)
}

// Reset forgets every key: counting starts again now.
func (t *Tracker) Reset() {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cur.reset()
	if t.prev != nil {
		t.prev.reset()
	}
	t.start, t.since = now, now
}

// An Entry is one key of a Snapshot, with an upper bound of how often it
// was denied (or of the cost refused, with WithCostWeight) and how far that
// bound may exceed the true count: the true count is between Count − Error
// and Count.
type Entry struct {
	// Key is the key, or for a key longer than WithMaxKeyLen's bound the
	// hex SHA-256 digest of the key (what sha256sum prints for it).
	Key string
	// Long reports that Key is the digest of a long key.
	Long bool
	// Count is at least the key's true count.
	Count int64
	// Error is how much Count may exceed the true count; 0 means exact.
	Error int64
}

// A Snapshot is what a Tracker counted over one period.
type Snapshot struct {
	// Since and Until are the period counted: with windows of d, from the
	// start of the previous window (not before New or the last Reset) to
	// now; without, from New or the last Reset.
	Since, Until time.Time
	// Total is N, the sum of everything counted in the period: the number
	// of denials (or their cost, with WithCostWeight).
	Total int64
	// Capacity is m, the number of counters per window.
	Capacity int
	// Bound is the error bound of the period: every key whose true count
	// exceeds Bound is in the summary (so in Entries if k is large
	// enough), any other key's count is at most Bound, and no Entry's Error
	// exceeds it. Bound is 0, and every count exact, until a key loses
	// its counter to another (more than m distinct keys in a window); it
	// never exceeds Total/m.
	Bound int64
	// Entries are the k keys with the highest Count, highest first (ties:
	// the highest Count − Error first, then short keys before long ones,
	// then by Key).
	Entries []Entry
}

// Top returns the k most denied keys of the period, as Snapshot(k).Entries.
func (t *Tracker) Top(k int) []Entry {
	return t.Snapshot(k).Entries
}

// Snapshot returns the k most denied keys of the period, highest count
// first, and the period's totals and error bound. k ≤ 0 returns no keys;
// at most 2m keys are known (m per window). It copies the counters under
// the lock (O(m)) and ranks them outside it.
func (t *Tracker) Snapshot(k int) Snapshot {
	now := t.clock.Now()
	t.mu.Lock()
	t.rotate(now)
	cur := slices.Clone(t.cur.slots)
	floorCur, total := t.cur.floor, t.cur.total
	var prev []slot
	var floorPrev int64
	since := t.since
	if t.prev != nil {
		prev = slices.Clone(t.prev.slots)
		floorPrev, total = t.prev.floor, satAdd(total, t.prev.total)
		if s := t.start.Add(-t.window); s.After(since) {
			since = s
		}
	}
	t.mu.Unlock()

	return Snapshot{
		Since:    since,
		Until:    now,
		Total:    total,
		Capacity: t.capacity,
		Bound:    satAdd(floorCur, floorPrev),
		Entries:  merge(cur, floorCur, prev, floorPrev, k),
	}
}

// merge returns the k entries of the highest counts of the union of two
// summaries, a and b, whose floors are floorA and floorB. A key one summary
// lacks counted at most that summary's floor there, so its count there is
// bounded by the floor, with an error of the floor: the merged count is an
// upper bound whose error is at most floorA + floorB.
func merge(a []slot, floorA int64, b []slot, floorB int64, k int) []Entry {
	if k <= 0 {
		return nil
	}
	type ident struct {
		key  string
		long bool
	}
	type sum struct {
		Entry
		inB bool
	}
	sums := make([]sum, 0, len(a)+len(b))
	at := make(map[ident]int, len(a))
	for _, s := range a {
		at[ident{s.key, s.long}] = len(sums)
		sums = append(sums, sum{Entry: Entry{Key: s.key, Long: s.long, Count: s.count, Error: s.err}})
	}
	for _, s := range b {
		if i, ok := at[ident{s.key, s.long}]; ok {
			e := &sums[i]
			e.Count, e.Error, e.inB = satAdd(e.Count, s.count), satAdd(e.Error, s.err), true
			continue
		}
		sums = append(sums, sum{Entry: Entry{Key: s.key, Long: s.long, Count: satAdd(s.count, floorA), Error: satAdd(s.err, floorA)}, inB: true})
	}
	entries := make([]Entry, len(sums))
	for i, s := range sums {
		if !s.inB {
			s.Count, s.Error = satAdd(s.Count, floorB), satAdd(s.Error, floorB)
		}
		entries[i] = s.Entry
	}
	slices.SortFunc(entries, rank)
	entries = entries[:min(k, len(entries))]
	for i := range entries {
		if entries[i].Long {
			entries[i].Key = hex.EncodeToString([]byte(entries[i].Key))
		}
	}
	return entries
}

// rank orders entries by Count, highest first, then by Count − Error,
// highest first, then by Key, short keys before long ones.
func rank(x, y Entry) int {
	switch {
	case x.Count != y.Count:
		return cmp.Compare(y.Count, x.Count)
	case x.Error != y.Error:
		return cmp.Compare(x.Error, y.Error)
	case x.Long != y.Long:
		if y.Long {
			return -1
		}
		return 1
	}
	return strings.Compare(x.Key, y.Key)
}
