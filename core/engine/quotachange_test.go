package engine_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// A limit whose quota changes keeps its key's state (engine.Limit.Ident),
// and what the state means under the new numbers is what Ident's doc and
// docs/rules.md say: the windows and logs keep the units used, a token
// bucket the tokens left, GCRA and the leaky bucket the time at which the
// key is full again. 3 taken of 5 a second, then 10 a second at the same
// instant.
func TestAQuotaChangeKeepsWhatEachStateHolds(t *testing.T) {
	for _, c := range []struct {
		alg  core.Algorithm
		left int64
	}{
		{core.FixedWindow, 7}, {core.SlidingWindow, 7}, {core.SlidingLog, 7}, {core.BucketedWindow, 7}, {core.Concurrency, 7},
		{core.TokenBucket, 2},
		{core.GCRA, 4}, {core.LeakyBucket, 4},
	} {
		limit := func(q int64) core.Limit {
			l := core.Per(q, time.Second).WithAlgorithm(c.alg)
			if c.alg == core.BucketedWindow {
				l = l.WithPrecision(100 * time.Millisecond)
			}
			return l
		}
		states := make([]engine.State, 1)
		now := t0us + 250_000 // within a window, not at its start
		for range 3 {
			o := op{Kind: engine.Take, Key: "k", Limits: []core.Limit{limit(5)}, Cost: 1}
			if d, _, err := step(&o, now, states); err != nil || !d.Allowed {
				t.Fatalf("%s: take of 5/s: %+v, %v", c.alg, d, err)
			}
		}
		o := op{Kind: engine.Peek, Key: "k", Limits: []core.Limit{limit(10)}, Cost: 1}
		d, _, err := step(&o, now, states)
		if err != nil {
			t.Fatal(err)
		}
		if d.Remaining != c.left {
			t.Errorf("%s: 3 taken of 5/s, then 10/s: %d left, want %d", c.alg, d.Remaining, c.left)
		}
	}
}
