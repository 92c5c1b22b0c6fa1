package topk_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/topk"
)

// epoch is the fake clock's start.
var epoch = time.Date(2025, 1, 2, 15, 0, 0, 0, time.UTC)

// fakeClock is a clock moved by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func newTracker(t testing.TB, opts ...topk.Option) *topk.Tracker {
	t.Helper()
	tr, err := topk.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tr
}

// id is how an Entry names key: the key, or the hex SHA-256 of a key
// longer than maxKeyLen.
func id(key string, maxKeyLen int) string {
	if len(key) > maxKeyLen {
		d := sha256.Sum256([]byte(key))
		return "long:" + hex.EncodeToString(d[:])
	}
	return "short:" + key
}

func entryID(e topk.Entry) string {
	if e.Long {
		return "long:" + e.Key
	}
	return "short:" + e.Key
}

// checkBound checks the guarantees of s, a snapshot of every key (k ≥ 2m),
// against the exact counts, by id: every listed count is an upper bound
// whose error is within Error and Bound, every key above Bound is listed,
// every other key counted at most Bound, and Bound ≤ Total/m.
func checkBound(t *testing.T, s topk.Snapshot, exact map[string]int64) {
	t.Helper()
	var total int64
	for _, n := range exact {
		total += n
	}
	if s.Total != total {
		t.Errorf("Total = %d, want %d", s.Total, total)
	}
	if s.Bound > s.Total/int64(s.Capacity) {
		t.Errorf("Bound = %d, want at most Total/m = %d/%d", s.Bound, s.Total, s.Capacity)
	}
	listed := make(map[string]bool, len(s.Entries))
	for _, e := range s.Entries {
		k := entryID(e)
		if listed[k] {
			t.Errorf("key %s listed twice", k)
		}
		listed[k] = true
		f := exact[k]
		if f > e.Count || f < e.Count-e.Error {
			t.Errorf("key %s: true count %d outside [Count−Error, Count] = [%d, %d]", k, f, e.Count-e.Error, e.Count)
		}
		if e.Error > s.Bound || e.Error < 0 {
			t.Errorf("key %s: Error = %d, want 0 to Bound = %d", k, e.Error, s.Bound)
		}
	}
	for k, f := range exact {
		if f > s.Bound && !listed[k] {
			t.Errorf("key %s: true count %d > Bound %d, but not listed", k, f, s.Bound)
		}
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	cases := []struct {
		name   string
		opt    topk.Option
		option string
	}{
		{"no counters", topk.WithCapacity(0), "WithCapacity"},
		{"too many counters", topk.WithCapacity(topk.MaxCapacity + 1), "WithCapacity"},
		{"a negative window", topk.WithWindow(-time.Second), "WithWindow"},
		{"a key length of zero", topk.WithMaxKeyLen(0), "WithMaxKeyLen"},
		{"a nil clock", topk.WithClock(nil), "WithClock"},
	}
	for _, c := range cases {
		t.Run(c.name+" is an error naming the option", func(t *testing.T) {
			tr, err := topk.New(c.opt)
			if !errors.Is(err, topk.ErrInvalidOption) || !strings.Contains(err.Error(), c.option) {
				t.Fatalf("New(%s) = %v, %v; want an error wrapping ErrInvalidOption naming %s", c.name, tr, err, c.option)
			}
		})
	}
}

// TestZipfTopTen counts a Zipf-distributed stream over 100,000 keys, long
// enough that the 10th most frequent key is more than Total/m ahead of the
// 11th: the guarantee then implies that Top(10) is exactly the true top 10.
func TestZipfTopTen(t *testing.T) {
	const (
		keys    = 100_000
		samples = 300_000
	)
	r := rand.New(rand.NewPCG(11, 2025))
	z := rand.NewZipf(r, 1.1, 1, keys-1)
	// Ranks are shuffled into names, so that no order of names helps.
	names := make([]string, keys)
	for i, p := range r.Perm(keys) {
		names[i] = "user-" + strconv.Itoa(p)
	}
	tr := newTracker(t, topk.WithWindow(0))
	exact := make(map[string]int64)
	for range samples {
		k := names[z.Uint64()]
		exact[k]++
		tr.Denied(k, 1)
	}

	type kc struct {
		key string
		n   int64
	}
	truth := make([]kc, 0, len(exact))
	for k, n := range exact {
		truth = append(truth, kc{k, n})
	}
	slices.SortFunc(truth, func(a, b kc) int { return int(b.n - a.n) })
	s := tr.Snapshot(10)
	m := int64(s.Capacity)
	if len(exact) < 10*s.Capacity {
		t.Fatalf("only %d distinct keys for %d counters: the sketch is not under pressure", len(exact), m)
	}
	if gap := truth[9].n - truth[10].n; gap <= samples/m {
		t.Fatalf("workload not separated: 10th count %d − 11th %d = %d ≤ N/m = %d", truth[9].n, truth[10].n, gap, samples/m)
	}
	if s.Bound == 0 {
		t.Fatalf("Bound = 0 after %d distinct keys in %d counters; want the sketch to have evicted", len(exact), m)
	}

	got := make(map[string]topk.Entry, len(s.Entries))
	for _, e := range s.Entries {
		got[e.Key] = e
	}
	for i, want := range truth[:10] {
		e, ok := got[want.key]
		switch {
		case !ok:
			t.Errorf("true #%d %s (count %d) missing from Top(10) = %v", i+1, want.key, want.n, s.Entries)
		case want.n > e.Count || want.n < e.Count-e.Error || e.Count-want.n > samples/m:
			t.Errorf("true #%d %s: Count %d, Error %d for a true count of %d; want within N/m = %d", i+1, want.key, e.Count, e.Error, want.n, samples/m)
		}
	}
	checkBound(t, tr.Snapshot(2*s.Capacity), prefixed(exact, "short:"))
}

func prefixed(m map[string]int64, p string) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[p+k] = v
	}
	return out
}

// An event is one Add of a stream.
type event struct {
	key string
	n   int64
}

func TestBoundOnAdversarialStreams(t *testing.T) {
	const m = 16
	long := func(i int) string { return strings.Repeat("x", 200) + strconv.Itoa(i) }
	streams := []struct {
		name string
		gen  func() []event
	}{
		{"a flood of distinct keys", func() []event {
			var es []event
			for i := range 10_000 {
				es = append(es, event{"flood-" + strconv.Itoa(i), 1})
			}
			return es
		}},
		{"a round robin over m+1 keys, each arrival evicting", func() []event {
			var es []event
			for i := range 5_000 {
				es = append(es, event{"rr-" + strconv.Itoa(i%(m+1)), 1})
			}
			return es
		}},
		{"heavy keys arriving after a flood", func() []event {
			var es []event
			for i := range 5_000 {
				es = append(es, event{"flood-" + strconv.Itoa(i), 1})
			}
			for range 400 {
				es = append(es, event{"late-a", 1}, event{"late-b", 1})
			}
			return es
		}},
		{"heavy keys first, then a flood that raises the minimum", func() []event {
			var es []event
			for range 300 {
				es = append(es, event{"early-a", 1}, event{"early-b", 1})
			}
			for i := range 8_000 {
				es = append(es, event{"flood-" + strconv.Itoa(i), 1})
			}
			return es
		}},
		{"increasing frequencies, rarest first", func() []event {
			var es []event
			for i := 1; i <= 60; i++ {
				for range i {
					es = append(es, event{"rank-" + strconv.Itoa(i), 1})
				}
			}
			return es
		}},
		{"weighted: huge costs on distinct keys among a steady heavy key", func() []event {
			var es []event
			for i := range 2_000 {
				es = append(es, event{"steady", 3}, event{"big-" + strconv.Itoa(i), int64(1 + i%97*50)})
			}
			return es
		}},
		{"long keys beside short keys equal to their digests", func() []event {
			var es []event
			for i := range 3_000 {
				d := sha256.Sum256([]byte(long(i % 5)))
				es = append(es, event{long(i % 5), 1}, event{string(d[:]), 1}, event{hex.EncodeToString(d[:]), 1}, event{"noise-" + strconv.Itoa(i), 1})
			}
			return es
		}},
	}
	for _, st := range streams {
		t.Run("the bound holds on "+st.name, func(t *testing.T) {
			tr := newTracker(t, topk.WithWindow(0), topk.WithCapacity(m))
			exact := make(map[string]int64)
			for i, e := range st.gen() {
				tr.Add(e.key, e.n)
				exact[id(e.key, topk.DefaultMaxKeyLen)] += e.n
				if i%97 == 0 {
					checkBound(t, tr.Snapshot(2*m), exact)
				}
			}
			checkBound(t, tr.Snapshot(2*m), exact)
		})
	}
}

// TestBoundOnRandomStreams checks the guarantees on random streams with
// windows: the exact counts are those of the events at or after Since.
func TestBoundOnRandomStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		m := 1 + r.IntN(8)
		window := time.Duration(1+r.IntN(5)) * time.Second
		clock := &fakeClock{now: epoch}
		tr := newTracker(t, topk.WithCapacity(m), topk.WithWindow(window), topk.WithClock(clock), topk.WithMaxKeyLen(4))
		type timed struct {
			at time.Time
			event
		}
		var log []timed
		now := epoch
		z := rand.NewZipf(r, 1.3, 1, uint64(5+r.IntN(50)))
		for range 400 {
			now = now.Add(time.Duration(r.IntN(200)) * time.Millisecond)
			clock.Set(now)
			e := event{"k" + strconv.FormatUint(z.Uint64(), 10), 1 + r.Int64N(5)}
			tr.Add(e.key, e.n)
			log = append(log, timed{now, e})
			if r.IntN(20) == 0 {
				s := tr.Snapshot(2 * m)
				// The current window starts at a multiple of w after the
				// epoch; the period, one window before, not before New.
				since := epoch.Add(now.Sub(epoch)/window*window - window)
				if since.Before(epoch) {
					since = epoch
				}
				if !s.Since.Equal(since) || !s.Until.Equal(now) {
					t.Fatalf("stream %d: period [%v, %v], want [%v, %v]", i, s.Since, s.Until, since, now)
				}
				exact := make(map[string]int64)
				for _, l := range log {
					if !l.at.Before(s.Since) {
						exact[id(l.key, 4)] += l.n
					}
				}
				checkBound(t, s, exact)
			}
		}
	}
}

func TestWindows(t *testing.T) {
	const w = time.Minute
	clock := &fakeClock{now: epoch}
	tr := newTracker(t, topk.WithWindow(w), topk.WithClock(clock))
	steps := []struct {
		at    time.Duration
		add   string
		since time.Duration
		want  string // the snapshot after the step: key=count ...
	}{
		{0, "a", 0, "a=1"},
		{30 * time.Second, "a", 0, "a=2"},
		{61 * time.Second, "b", 0, "a=2 b=1"},
		{119 * time.Second, "", 0, "a=2 b=1"},
		{125 * time.Second, "", w, "b=1"},
		{150 * time.Second, "c", w, "b=1 c=1"},
		{250 * time.Second, "", 3 * w, ""},
		{10 * w, "d", 9 * w, "d=1"},
	}
	for _, s := range steps {
		clock.Set(epoch.Add(s.at))
		if s.add != "" {
			tr.Add(s.add, 1)
		}
		snap := tr.Snapshot(10)
		var got []string
		for _, e := range snap.Entries {
			got = append(got, e.Key+"="+strconv.FormatInt(e.Count, 10))
		}
		if g := strings.Join(got, " "); g != s.want || !snap.Since.Equal(epoch.Add(s.since)) {
			t.Errorf("at %v: Snapshot = %q since %v, want %q since %v", s.at, g, snap.Since.Sub(epoch), s.want, s.since)
		}
	}
}

func TestWithoutWindowsCountsForEver(t *testing.T) {
	clock := &fakeClock{now: epoch}
	tr := newTracker(t, topk.WithWindow(0), topk.WithClock(clock))
	tr.Add("a", 2)
	clock.Set(epoch.Add(1000 * time.Hour))
	tr.Add("a", 1)
	s := tr.Snapshot(1)
	if len(s.Entries) != 1 || s.Entries[0].Count != 3 || !s.Since.Equal(epoch) {
		t.Fatalf("Snapshot(1) = %+v, want a=3 since the epoch", s)
	}
}

func TestReset(t *testing.T) {
	clock := &fakeClock{now: epoch}
	tr := newTracker(t, topk.WithClock(clock), topk.WithCapacity(2))
	for _, k := range []string{"a", "b", "c", "a"} {
		tr.Add(k, 5)
	}
	clock.Set(epoch.Add(time.Second))
	tr.Reset()
	if s := tr.Snapshot(10); len(s.Entries) != 0 || s.Total != 0 || s.Bound != 0 || !s.Since.Equal(epoch.Add(time.Second)) {
		t.Fatalf("Snapshot after Reset = %+v, want empty since the reset", s)
	}
	tr.Add("d", 1)
	if got := tr.Top(10); len(got) != 1 || got[0] != (topk.Entry{Key: "d", Count: 1}) {
		t.Fatalf("Top(10) = %+v, want d=1 exactly", got)
	}
}

func TestAddIgnoresNothingToCount(t *testing.T) {
	tr := newTracker(t)
	tr.Add("a", 0)
	tr.Add("a", -3)
	if s := tr.Snapshot(1); s.Total != 0 || len(s.Entries) != 0 {
		t.Fatalf("Snapshot after Add(a, 0) and Add(a, −3) = %+v, want nothing counted", s)
	}
	if got := tr.Top(0); got != nil {
		t.Fatalf("Top(0) = %v, want nil", got)
	}
}

func TestDeniedWeighsByCostOnlyWhenAsked(t *testing.T) {
	for _, weighted := range []bool{false, true} {
		t.Run("with WithCostWeight("+strconv.FormatBool(weighted)+")", func(t *testing.T) {
			tr := newTracker(t, topk.WithCostWeight(weighted))
			tr.Denied("a", 5)
			tr.Denied("a", 2)
			want := int64(2)
			if weighted {
				want = 7
			}
			if got := tr.Top(1); len(got) != 1 || got[0].Count != want {
				t.Fatalf("Top(1) = %+v, want a=%d", got, want)
			}
		})
	}
}

func TestLongKeysAreHashed(t *testing.T) {
	tr := newTracker(t, topk.WithMaxKeyLen(8))
	long := "a-very-long-api-key"
	tr.Add(long, 3)
	tr.Add("12345678", 1) // exactly the bound: kept as is
	d := sha256.Sum256([]byte(long))
	want := []topk.Entry{{Key: hex.EncodeToString(d[:]), Long: true, Count: 3}, {Key: "12345678", Count: 1}}
	if got := tr.Top(2); !slices.Equal(got, want) {
		t.Fatalf("Top(2) = %+v, want %+v", got, want)
	}
}

// TestKeysAreCopied passes a key whose bytes the caller reuses, as a
// framework that recycles its buffers may: the tracker keeps its own copy.
func TestKeysAreCopied(t *testing.T) {
	tr := newTracker(t)
	buf := []byte("alice")
	tr.Add(unsafe.String(&buf[0], len(buf)), 1)
	copy(buf, "mallo")
	tr.Add("alice", 1)
	if got := tr.Top(2); len(got) != 1 || got[0].Key != "alice" || got[0].Count != 2 {
		t.Fatalf("Top(2) = %+v, want alice=2", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	const (
		workers = 8
		perG    = 5_000
		keys    = 100
	)
	tr := newTracker(t, topk.WithCapacity(keys), topk.WithClock(core.SystemClock()))
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range perG {
				tr.Denied("k"+strconv.Itoa((g+i)%keys), 1)
			}
		})
	}
	wg.Go(func() { // a reader meanwhile
		for range 50 {
			tr.Snapshot(keys)
		}
	})
	wg.Wait()
	s := tr.Snapshot(keys)
	if s.Total != workers*perG || len(s.Entries) != keys || s.Bound != 0 {
		t.Fatalf("Snapshot: Total %d, %d keys, Bound %d; want %d, %d, 0", s.Total, len(s.Entries), s.Bound, workers*perG, keys)
	}
	for _, e := range s.Entries {
		if e.Count != workers*perG/keys || e.Error != 0 {
			t.Errorf("%s: Count %d, Error %d; want exactly %d", e.Key, e.Count, e.Error, workers*perG/keys)
		}
	}
}
