package guardtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
)

// RunSlowRefund runs, through the middleware build returns, a request
// that is admitted just before a window ends and fails (a 500, refunded by
// WithRefundOn(ServerErrors)) after the next window began and filled:
// its refund goes back to the window it was taken from, which is gone,
// and makes no room in the new one. The admissions that stand never
// exceed the quota in any window.
func RunSlowRefund(t *testing.T, build func(t *testing.T, cfg Config) http.Handler) {
	t.Helper()
	clock := NewClock(Epoch.Add(59500 * time.Millisecond)) // window [0, 60 s) of a per-minute limit
	st := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	t.Cleanup(func() { st.Close() })
	lim, err := core.New(st, fixed(2, time.Minute, "per-minute"), core.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("slow") {
			close(entered)
			<-release
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	opts := []guard.Option{guard.WithRefundOn(guard.ServerErrors)}
	h := build(t, Config{Limiter: lim, App: app, Options: opts, Layers: []Layer{{Scope: AppWide, Limiter: lim, Options: opts}}})
	get := func(target string) int {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.RemoteAddr = clientA
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	slow := make(chan int)
	go func() { slow <- get("/?slow=1") }()
	<-entered // admitted at 59.5 s, in window [0, 60 s)
	clock.Advance(time.Second)
	standing := 0 // admitted in [60 s, 120 s) and not refunded
	for i, want := range []int{200, 200, 429} {
		if got := get("/"); got != want {
			t.Fatalf("request %d at 60.5 s: status %d, want %d", i+1, got, want)
		} else if got == 200 {
			standing++
		}
	}
	close(release)
	if got := <-slow; got != http.StatusInternalServerError {
		t.Fatalf("the slow request: status %d, want 500", got)
	}
	got := get("/")
	if got == 200 {
		standing++
	}
	if standing > 2 {
		t.Errorf("%d requests stand in [60 s, 120 s), more than its quota of 2: the slow request's refund, of units it took in [0, 60 s), made room after 60 s", standing)
	}
	if got != 429 {
		t.Errorf("after the slow request's refund: status %d, want 429", got)
	}
	if d, err := lim.Peek(context.Background(), "192.0.2.1"); err != nil || d.Remaining != 0 {
		t.Errorf("Peek = %+v, %v; want 0 remaining in the new window", d, err)
	}
}
