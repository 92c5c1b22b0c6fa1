package topk

import (
	"crypto/sha256"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
)

// checkSummary checks the structure of s: a heap ordered by count whose
// positions match the slots, maps that name each used slot once, counts
// that sum to the total, errors within the floor, at most m counters.
func checkSummary(t *testing.T, s *summary) {
	t.Helper()
	if len(s.slots) > s.m || len(s.heap) != len(s.slots) || len(s.short)+len(s.long) != len(s.slots) {
		t.Fatalf("%d slots, %d heap entries, %d+%d mapped keys for m = %d", len(s.slots), len(s.heap), len(s.short), len(s.long), s.m)
	}
	var sum int64
	for j, i := range s.heap {
		if s.slots[i].pos != int32(j) {
			t.Fatalf("slot %d at heap %d says pos %d", i, j, s.slots[i].pos)
		}
		if j > 0 && s.less(j, (j-1)/2) {
			t.Fatalf("heap %d (count %d) below its parent (count %d)", j, s.slots[i].count, s.slots[s.heap[(j-1)/2]].count)
		}
	}
	for i, sl := range s.slots {
		sum += sl.count
		if sl.err > s.floor || sl.err > sl.count {
			t.Fatalf("slot %d: err %d, count %d, floor %d", i, sl.err, sl.count, s.floor)
		}
		var got int32
		var ok bool
		if sl.long {
			var d digest
			copy(d[:], sl.key)
			got, ok = s.long[d]
		} else {
			got, ok = s.short[sl.key]
		}
		if !ok || got != int32(i) {
			t.Fatalf("slot %d (%q, long %v) mapped to %d, %v", i, sl.key, sl.long, got, ok)
		}
	}
	if sum != s.total {
		t.Fatalf("counts sum to %d, total %d", sum, s.total)
	}
}

func TestSummaryStructure(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, m := range []int{1, 2, 3, 7, 64} {
		t.Run("a summary of "+strconv.Itoa(m)+" counters stays a consistent heap", func(t *testing.T) {
			s := newSummary(m)
			for i := range 5_000 {
				k := strconv.Itoa(r.IntN(3 * m))
				n := 1 + r.Int64N(9)
				if r.IntN(4) == 0 {
					d := sha256.Sum256([]byte(k))
					s.addLong(&d, n)
				} else {
					s.addShort(k, n)
				}
				if i%50 == 0 {
					checkSummary(t, s)
				}
				if i == 2_500 {
					s.reset()
					checkSummary(t, s)
				}
			}
			checkSummary(t, s)
		})
	}
}

func TestSaturatingCounts(t *testing.T) {
	s := newSummary(1)
	s.addShort("a", 1<<62)
	s.addShort("a", 1<<62)
	s.addShort("b", 1<<62)
	if sl := s.slots[0]; sl.count != 1<<63-1 || s.total != 1<<63-1 || sl.key != "b" {
		t.Fatalf("after 3×2^62: %+v, total %d; want b saturated at MaxInt64", sl, s.total)
	}
}

// TestMemoryBoundedUnderFlood floods a tracker with distinct keys: the
// heap it keeps does not grow with their number.
func TestMemoryBoundedUnderFlood(t *testing.T) {
	const m = 256
	tr, err := New(WithCapacity(m), WithWindow(0))
	if err != nil {
		t.Fatal(err)
	}
	flood := func(from, n int) {
		for i := from; i < from+n; i++ {
			tr.Add("flooding-client-"+strconv.Itoa(i), 1)
		}
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	flood(0, 10*m) // fill, and let the maps reach their size
	before := heap()
	flood(10*m, 300_000)
	after := heap()
	checkSummary(t, tr.cur)
	// 300,000 keys of about 22 bytes would hold over 6 MB if kept.
	if after > before+512<<10 {
		t.Fatalf("heap grew from %d to %d bytes over a flood of 300,000 keys into %d counters", before, after, m)
	}
	runtime.KeepAlive(tr)
}
