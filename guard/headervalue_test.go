package guard

import (
	"strings"
	"testing"
)

func TestHeaderValuesStayAsBuiltAcrossArenaChunks(t *testing.T) {
	buf := make([]byte, 0, 2*maxArenaValue)
	var got [][]string
	var want []string
	// Enough values, of every length up to beyond the arena's bound, to
	// fill several chunks of bytes and of slots.
	for i := range 3 * arenaSlots {
		n := i % (maxArenaValue + 20)
		buf = append(buf[:0], strings.Repeat(string(rune('a'+i%26)), n)...)
		got = append(got, headerValue(buf))
		want = append(want, string(buf))
		clear(buf[:cap(buf)]) // the caller reuses its buffer
	}
	for i := range got {
		if len(got[i]) != 1 || got[i][0] != want[i] {
			t.Fatalf("value %d = %q, want [%q]", i, got[i], want[i])
		}
		if cap(got[i]) != 1 {
			t.Errorf("value %d has capacity %d, want 1: an append would write over another response's value", i, cap(got[i]))
		}
	}
}
