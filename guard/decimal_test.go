package guard

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAppendIntMatchesStrconv holds the headers' number formatter to
// strconv's at every width: each power of ten and its neighbours, the
// extremes, and random numbers of every bit length, appended to a prefix
// in a slice both with and without room to spare.
func TestAppendIntMatchesStrconv(t *testing.T) {
	ns := []int64{0, 1, 9, 10, 11, 99, 100, 101, maxSFInt, math.MaxInt64, math.MaxInt64 - 1, -1, -10, math.MinInt64}
	for p := int64(1); p <= math.MaxInt64/10; p *= 10 {
		ns = append(ns, p-1, p, p+1, 10*p-1)
	}
	r := rand.New(rand.NewPCG(7, 11))
	for bitLen := 1; bitLen < 63; bitLen++ {
		for range 200 {
			ns = append(ns, r.Int64N(int64(1)<<bitLen))
		}
	}
	for range 200 {
		ns = append(ns, r.Int64(), -r.Int64())
	}
	for _, n := range ns {
		want := strconv.AppendInt([]byte("x;r="), n, 10)
		for _, prefix := range [][]byte{[]byte("x;r="), append(make([]byte, 0, 64), "x;r="...)} {
			if got := appendInt(prefix, n); string(got) != string(want) {
				t.Fatalf("appendInt(%q, %d) = %q, want %q", prefix, n, got, want)
			}
		}
	}
}

// TestDecimalWidth checks the digit count at each power of ten and one
// below it, up to the largest uint64.
func TestDecimalWidth(t *testing.T) {
	for w, p := 1, uint64(1); w <= 20; w++ {
		if got := decimalWidth(p); got != w {
			t.Fatalf("decimalWidth(%d) = %d, want %d", p, got, w)
		}
		if w > 1 {
			if got := decimalWidth(p - 1); got != w-1 {
				t.Fatalf("decimalWidth(%d) = %d, want %d", p-1, got, w-1)
			}
		}
		if w < 20 {
			p *= 10
		}
	}
	if got := decimalWidth(math.MaxUint64); got != 20 {
		t.Fatalf("decimalWidth(MaxUint64) = %d, want 20", got)
	}
}
