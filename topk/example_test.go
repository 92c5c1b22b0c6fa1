package topk_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
	"github.com/tollgate/tollgate/nethttp"
	"github.com/tollgate/tollgate/topk"
)

// The middleware feeds the tracker through its OnDenied hook; Top reads
// it.
func Example() {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, _ := core.New(store, core.PerMinute(2))
	t, _ := topk.New(topk.WithClock(clock))

	h := nethttp.New(lim,
		nethttp.WithKey(keyfuncs.Header("X-API-Key")),
		guard.WithOnDenied(topk.OnDenied(t)),
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, key := range []string{"alice", "bob", "alice", "alice", "carol", "alice", "bob", "bob", "bob"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", key)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}

	for _, e := range t.Top(3) {
		fmt.Printf("%s denied %d times (up to %d fewer)\n", e.Key, e.Count, e.Error)
	}
	// Output:
	// alice denied 2 times (up to 0 fewer)
	// bob denied 2 times (up to 0 fewer)
}

// With fewer counters than keys, counts become upper bounds: Error says
// by how much each may exceed the truth, Bound for every key.
func ExampleTracker_Snapshot() {
	t, _ := topk.New(topk.WithCapacity(2), topk.WithWindow(0))
	for _, key := range []string{"a", "a", "a", "b", "c", "a", "d"} {
		t.Denied(key, 1)
	}
	s := t.Snapshot(2)
	fmt.Printf("%d denials, bound %d\n", s.Total, s.Bound)
	for _, e := range s.Entries {
		fmt.Printf("%s: %d to %d\n", e.Key, e.Count-e.Error, e.Count)
	}
	// Output:
	// 7 denials, bound 2
	// a: 4 to 4
	// d: 1 to 3
}

// A Handler serves the snapshot as JSON; raw keys only on request.
func ExampleNewHandler() {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	t, _ := topk.New(topk.WithClock(clock))
	t.Denied("203.0.113.7", 1)
	h, _ := topk.NewHandler(t, topk.WithRawKeys(true))

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/debug/topk?k=5", nil))
	fmt.Print(w.Body)
	// Output:
	// {"keys":"raw","since":"2025-01-01T00:00:00Z","until":"2025-01-01T00:00:00Z","total":1,"capacity":1024,"bound":0,"top":[{"key":"203.0.113.7","count":1,"error":0}]}
}
