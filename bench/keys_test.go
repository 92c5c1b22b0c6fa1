package bench

import (
	"strconv"
	"strings"
	"testing"
)

// distinctKeys returns n keys shaped like the IPv4 addresses that HTTP rate
// limiters are usually keyed by, counting up from 198.18.0.0 (the RFC 2544
// benchmarking range, 2^17 addresses), and fails tb unless all n are
// distinct: a key set that silently repeats would measure fewer keys than its
// name says.
func distinctKeys(tb testing.TB, n int) []string {
	tb.Helper()
	if n > 1<<17 {
		tb.Fatalf("distinctKeys(%d): the range 198.18.0.0/15 holds only %d addresses", n, 1<<17)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "198." + strconv.Itoa(18+i>>16) + "." + strconv.Itoa(i>>8&0xff) + "." + strconv.Itoa(i&0xff)
	}
	seen := make(map[string]struct{}, n)
	for _, k := range keys {
		seen[k] = struct{}{}
	}
	if len(seen) != n {
		tb.Fatalf("distinctKeys(%d) made %d distinct keys, want %d", n, len(seen), n)
	}
	return keys
}

// cloneKeys returns keys equal to keys, each in newly allocated memory.
func cloneKeys(keys []string) []string {
	c := make([]string, len(keys))
	for i, k := range keys {
		c[i] = strings.Clone(k)
	}
	return c
}

func TestDistinctKeys(t *testing.T) {
	keys := distinctKeys(t, 1<<17)
	for _, tc := range []struct {
		i    int
		want string
	}{
		{0, "198.18.0.0"},
		{255, "198.18.0.255"},
		{256, "198.18.1.0"},
		{1<<16 - 1, "198.18.255.255"},
		{1 << 16, "198.19.0.0"},
		{1<<17 - 1, "198.19.255.255"},
	} {
		if keys[tc.i] != tc.want {
			t.Errorf("distinctKeys(1<<17)[%d] = %q, want %q", tc.i, keys[tc.i], tc.want)
		}
	}
}
