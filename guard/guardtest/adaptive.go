package guardtest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// RunAdaptive checks, through the middleware that build returns (called
// as Run calls it, with one AppWide layer and an App of RunAdaptive's
// own), the adaptive concurrency limit (guard.WithAdaptive) beside a rate
// limit, with a limit held at 2 and sheddable requests (header
// X-Priority: sheddable) admitted below 1:
//
//   - while a critical request is in its handler, a sheddable one is shed:
//     503, a Retry-After, a problem+json body of type
//     guard.ProblemTypeOverloaded, and no charge in the rate limit;
//   - a second critical request is admitted, a third is shed;
//   - handlers that panic give their unit back as the panic goes through
//     the middleware: afterwards nothing is in flight.
//
// Requests are held in their handlers by the test, not by time: it is
// deterministic.
func RunAdaptive(t *testing.T, build func(t *testing.T, cfg Config) http.Handler) {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	rate, err := core.New(st, core.PerMinute(100).Named("per-minute"))
	if err != nil {
		t.Fatal(err)
	}
	ad, err := adaptive.New(adaptive.WithInitialLimit(2), adaptive.WithMinLimit(2), adaptive.WithMaxLimit(2),
		adaptive.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	leave := make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Has("panic"):
			panic("guardtest: the handler panics")
		case r.URL.Query().Has("hold"):
			entered <- struct{}{}
			<-leave
		}
		w.WriteHeader(http.StatusOK)
	})
	opts := []guard.Option{guard.WithAdaptive(ad), guard.WithPriority(func(r keyfuncs.Request) adaptive.Priority {
		if r.Header("X-Priority") == "sheddable" {
			return adaptive.Sheddable
		}
		return adaptive.Critical
	})}
	h := build(t, Config{Limiter: rate, App: app, Options: opts,
		Layers: []Layer{{Scope: AppWide, Limiter: rate, Options: opts}}})
	send := func(query, priority string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/"+query, nil)
		req.RemoteAddr = clientA
		if priority != "" {
			req.Header.Set("X-Priority", priority)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	remaining := func() int64 {
		d, err := rate.Peek(context.Background(), "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}
	var wg sync.WaitGroup
	hold := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rec := send("?hold=1", ""); rec.Code != http.StatusOK {
				t.Errorf("held critical request: status %d, want 200", rec.Code)
			}
		}()
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("a critical request under the limit never reached its handler")
		}
	}

	hold() // 1 of 2 in flight
	rec := send("", "sheddable")
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("sheddable request with 1 of 2 in flight: status %d, want 503", rec.Code)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1 (the latency estimate, whole seconds, at least 1)", ra)
	}
	if ct := rec.Header().Get("Content-Type"); ct != guard.ContentTypeProblem {
		t.Errorf("Content-Type %q, want %s", ct, guard.ContentTypeProblem)
	}
	var body struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Type != guard.ProblemTypeOverloaded || body.Status != 503 {
		t.Errorf("body %s (%v), want the overloaded problem type, status 503", rec.Body.String(), err)
	}
	if got := remaining(); got != 99 {
		t.Errorf("rate limit: %d remaining after one admitted and one shed request, want 99: a shed request is charged nothing", got)
	}
	hold() // 2 of 2 in flight: critical still admitted
	if rec := send("", ""); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("critical request with 2 of 2 in flight: status %d, want 503", rec.Code)
	}
	close(leave)
	wg.Wait()
	if s := ad.Stats(); s.InFlight != 0 || s.Shed != 2 {
		t.Errorf("adaptive limit %+v after the held requests, want nothing in flight and 2 shed", s)
	}
	for range 4 {
		func() {
			defer func() { _ = recover() }()
			send("?panic=1", "")
		}()
	}
	if s := ad.Stats(); s.InFlight != 0 {
		t.Errorf("%d in flight after handlers that panicked, want none", s.InFlight)
	}
}

// FixedAdaptive returns an adaptive limit held at n, on clock, whose
// windows end at every sample: Stats().Latency is then the latency of the
// last request served, which a test reads to learn whether a request
// counted as served.
func FixedAdaptive(t testing.TB, clock core.Clock, n int) *adaptive.Limiter {
	t.Helper()
	lim, err := adaptive.New(adaptive.WithClock(clock), adaptive.WithInitialLimit(n),
		adaptive.WithMinLimit(n), adaptive.WithMaxLimit(n), adaptive.WithWindow(1, 1, time.Millisecond, time.Hour),
		adaptive.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}
