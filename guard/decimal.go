package guard

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
)

// appendInt appends n in decimal to b, as strconv.AppendInt(b, n, 10)
// does. The headers format two numbers or more on every response, and
// strconv's writes them into a buffer of its own and then calls memmove
// to append it; this one writes the digits in place, two at a time, from
// the last.
func appendInt(b []byte, n int64) []byte {
	if n < 0 {
		return strconv.AppendInt(b, n, 10)
	}
	u := uint64(n)
	if u < 10 {
		return append(b, byte('0'+u))
	}
	w := decimalWidth(u)
	b = slices.Grow(b, w)
	i := len(b) + w
	b = b[:i]
	for u >= 100 {
		q := u / 100
		i -= 2
		binary.LittleEndian.PutUint16(b[i:], digitPairs[u%100])
		u = q
	}
	if u >= 10 {
		binary.LittleEndian.PutUint16(b[i-2:], digitPairs[u])
	} else {
		b[i-1] = byte('0' + u)
	}
	return b
}

// decimalWidth returns how many decimal digits u has, for u > 0: about
// log10(2) (1233/4096) digits a bit, then one more if u reaches the next
// power of ten.
func decimalWidth(u uint64) int {
	t := bits.Len64(u) * 1233 >> 12
	if u >= powersOf10[t] {
		t++
	}
	return t
}

// powersOf10 are 10^0 to 10^19, every power of ten a uint64 holds.
var powersOf10 = [20]uint64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
}

// digitPairs holds "00" to "99", each as the two bytes of a little-endian
// uint16, so that a pair is one load and one store.
var digitPairs = func() (p [100]uint16) {
	for i := range p {
		p[i] = uint16('0'+i/10) | uint16('0'+i%10)<<8
	}
	return p
}()
