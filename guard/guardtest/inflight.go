package guardtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// RunInFlight checks, through the middleware that build returns (called
// as Run calls it, with one AppWide layer and an App of RunInFlight's
// own), that a Concurrency limit holds a unit of a request while its
// handler runs, and only then: 16 goroutines send 25 requests each for
// one client under a limit of 3 in flight (and a rate that never binds,
// in the same decision), and the handler, counting itself in flight,
// never sees more than 3, and sees 3; those over it get 429s. Then a
// handler that panics, for every request, releases its unit too, as the
// panic goes through the middleware: afterwards all 3 are free.
func RunInFlight(t *testing.T, build func(t *testing.T, cfg Config) http.Handler) {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	const slots = 3
	lim, err := core.New(st, core.InFlight(slots, time.Minute), core.PerSecond(1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	var cur, peak atomic.Int64
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("panic") {
			panic("guardtest: the handler panics")
		}
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Millisecond) // the handler's work
		cur.Add(-1)
		w.WriteHeader(http.StatusOK)
	})
	h := build(t, Config{Limiter: lim, App: app, Layers: []Layer{{Scope: AppWide, Limiter: lim}}})
	free := func(where string) {
		t.Helper()
		d, err := lim.Peek(context.Background(), "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		if d.States[0].Remaining != slots {
			t.Errorf("%s: %d of %d units in flight, want none", where, slots-d.States[0].Remaining, slots)
		}
	}
	var passed, denied atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.RemoteAddr = clientA
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				switch rec.Code {
				case http.StatusOK:
					passed.Add(1)
				case http.StatusTooManyRequests:
					denied.Add(1)
				default:
					t.Errorf("status %d, want 200 or 429", rec.Code)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d passed, %d denied; at most %d in the handler at once", passed.Load(), denied.Load(), peak.Load())
	if p := peak.Load(); p > slots {
		t.Errorf("%d requests in the handler at once, more than the limit of %d", p, slots)
	} else if p < slots || denied.Load() == 0 {
		t.Errorf("peak %d in flight, %d denied: the load never filled the limit, so tested nothing", p, denied.Load())
	}
	free("after the load")
	for range 2 * slots {
		func() {
			defer func() { _ = recover() }()
			req := httptest.NewRequest(http.MethodGet, "/?panic=1", nil)
			req.RemoteAddr = clientA
			h.ServeHTTP(httptest.NewRecorder(), req)
		}()
	}
	free("after handlers that panicked")
}
