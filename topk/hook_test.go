package topk_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
	"github.com/tollgate/tollgate/nethttp"
	"github.com/tollgate/tollgate/topk"
)

func TestOnDeniedCountsTheMiddlewaresDenials(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	const quota = 3 // per minute, in a fixed window: the clock stands still
	users := []string{"alice", "bob", "alice", "alice", "alice", "bob", "alice", "alice", "bob", "bob"}
	// want returns what the tracker should hold: each user's requests
	// beyond the quota/cost that pass are denied, counted once or at cost.
	want := func(cost int64, weighted bool) []topk.Entry {
		seen := map[string]int64{}
		for _, u := range users {
			seen[u]++
		}
		w := int64(1)
		if weighted {
			w = cost
		}
		return []topk.Entry{
			{Key: "alice", Count: (seen["alice"] - quota/cost) * w},
			{Key: "bob", Count: (seen["bob"] - quota/cost) * w},
		}
	}
	cases := []struct {
		name     string
		weighted bool
		opts     []guard.Option
		want     []topk.Entry
	}{
		{"one per denial", false, nil, want(1, false)},
		{"one per denial of cost 3, without WithCostWeight", false, []guard.Option{nethttp.WithCost(3)}, want(3, false)},
		{"the cost of each denial, with WithCostWeight", true, []guard.Option{nethttp.WithCost(3)}, want(3, true)},
		{"the denials of a dry run, which pass", false, []guard.Option{nethttp.WithDryRun(true)}, want(1, false)},
	}
	for _, c := range cases {
		t.Run("the hook counts "+c.name, func(t *testing.T) {
			tr := newTracker(t, topk.WithCostWeight(c.weighted))
			lim := guardtest.NewLimiter(t, nil, core.PerMinute(quota).WithAlgorithm(core.FixedWindow))
			opts := append([]guard.Option{
				nethttp.WithKey(keyfuncs.Header("X-User")),
				guard.WithOnDenied(topk.OnDenied(tr)),
			}, c.opts...)
			h := nethttp.New(lim, opts...)(ok)
			statuses := map[int]int{}
			for _, user := range users {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-User", user)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				statuses[w.Code]++
			}
			if got := tr.Top(10); !slices.Equal(got, c.want) {
				t.Fatalf("Top(10) = %+v after %v, want %+v", got, statuses, c.want)
			}
		})
	}
}

func TestOnDeniedOfNilFailsAtConstruction(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, core.PerMinute(1))
	if _, err := guard.New(lim, guard.WithOnDenied(topk.OnDenied(nil))); !errors.Is(err, guard.ErrInvalidOption) {
		t.Fatalf("guard.New(WithOnDenied(OnDenied(nil))) = %v, want ErrInvalidOption", err)
	}
}
