package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/internal/fastclock"
)

// On the default clock, which reads the CPU's counter once the process's
// Clock counts (where it can), windows roll over in real time: a key that
// used its limit is denied, with a RetryAfter within the window, and
// passes again once that RetryAfter has gone by.
func TestWindowsRollOverOnTheDefaultClock(t *testing.T) {
	for deadline := time.Now().Add(3 * time.Second); !fastclock.Shared().Counting() && time.Now().Before(deadline); {
		fastclock.Shared().Nanos()
		time.Sleep(time.Millisecond)
	}
	t.Logf("the process's Clock counts: %v", fastclock.Shared().Counting())
	const period = 200 * time.Millisecond
	for _, a := range []core.Algorithm{core.SlidingWindow, core.FixedWindow, core.GCRA, core.TokenBucket} {
		st := memstore.New()
		lim, err := core.New(st, core.Per(2, period).WithAlgorithm(a))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var d core.Decision
		for i := 0; i < 10 && (i == 0 || d.Allowed); i++ { // a pause of this goroutine may let a third pass
			if d, err = lim.Allow(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
		if d.Allowed {
			t.Fatalf("%s: 10 requests at once all allowed under a limit of 2", a)
		}
		if d.RetryAfter <= 0 || d.RetryAfter > 2*period {
			t.Fatalf("%s: RetryAfter %v, want within (0, %v]", a, d.RetryAfter, 2*period)
		}
		time.Sleep(d.RetryAfter + time.Millisecond)
		if d, err := lim.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("%s: after RetryAfter: %+v, %v; want allowed", a, d, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
