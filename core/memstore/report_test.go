package memstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/core"
)

// events is an Observer that keeps the events it sees.
type events struct {
	mu sync.Mutex
	ev []core.Event
}

func (o *events) ObserveDecision(context.Context, *core.Observation) {}
func (o *events) ObserveEvent(_ context.Context, e *core.Event) {
	o.mu.Lock()
	o.ev = append(o.ev, *e)
	o.mu.Unlock()
}

func (o *events) all() []core.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]core.Event(nil), o.ev...)
}

// lines is a slog.Handler that keeps each record as text.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (h *lines) Enabled(context.Context, slog.Level) bool { return true }
func (h *lines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	h.l = append(h.l, b.String())
	h.mu.Unlock()
	return nil
}
func (h *lines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lines) WithGroup(string) slog.Handler      { return h }

func (h *lines) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.l...)
}

// fill makes a store of maxKeys keys that evicts losslessly n times, then
// lossily m times.
func fill(t *testing.T, s *Store, clock *manualClock, maxKeys, n, m int) {
	t.Helper()
	short, long := core.PerSecond(10), core.PerHour(10)
	for i := range maxKeys {
		lim := long
		if i < n {
			lim = short
		}
		take(t, s, fmt.Sprintf("k-%d", i), lim)
	}
	clock.t = clock.t.Add(3 * time.Second) // the n per-second keys are replenished
	for i := range n + m {
		take(t, s, fmt.Sprintf("new-%d", i), long)
	}
}

// A store reports its keys and its evictions, lossless and lossy apart,
// to its observers: every second, and at Close.
func TestStoreReportsKeysAndEvictions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxKeys, n, m = 256, 30, 7
		obs := &events{}
		clock := &manualClock{t: epoch}
		s := New(WithMaxKeys(maxKeys), WithShards(1), WithClock(clock), WithSweepInterval(0),
			WithObserver(obs), WithName("app"), WithLogger(slog.New(slog.DiscardHandler)))
		fill(t, s, clock, maxKeys, n, m)
		if ev, lossy := s.Evictions(), s.LossyEvictions(); ev != n+m || lossy != m {
			t.Fatalf("Evictions(), LossyEvictions() = %d, %d; want %d, %d", ev, lossy, n+m, m)
		}
		if got := obs.all(); len(got) != 0 {
			t.Fatalf("events before a second passed: %+v, want none", got)
		}
		time.Sleep(ReportInterval)
		synctest.Wait()
		want := []core.Event{
			{Kind: core.EventKeys, Store: "app", Keys: maxKeys},
			{Kind: core.EventEviction, Store: "app", Count: n},
			{Kind: core.EventEviction, Store: "app", Count: m, Lossy: true},
		}
		if got := obs.all(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events after a second = %+v, want %+v", got, want)
		}
		take(t, s, "one-more", core.PerHour(10)) // one more lossy eviction
		s.Close()
		want = append(want, core.Event{Kind: core.EventKeys, Store: "app", Keys: maxKeys},
			core.Event{Kind: core.EventEviction, Store: "app", Count: 1, Lossy: true})
		if got := obs.all(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events after Close = %+v, want %+v (the last report)", got, want)
		}
	})
}

// Lossy evictions are logged, once per report with their count, by
// default; lossless ones are not.
func TestStoreLogsLossyEvictions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxKeys = 256
		logs := &lines{}
		prev := slog.Default()
		slog.SetDefault(slog.New(logs))
		defer slog.SetDefault(prev)
		clock := &manualClock{t: epoch}
		s := New(WithMaxKeys(maxKeys), WithShards(1), WithClock(clock), WithSweepInterval(0))
		defer s.Close()
		fill(t, s, clock, maxKeys, 10, 0)
		time.Sleep(ReportInterval)
		synctest.Wait()
		if got := logs.all(); len(got) != 0 {
			t.Fatalf("lossless evictions logged %q, want nothing", got)
		}
		for i := range 50 {
			take(t, s, fmt.Sprintf("flood-%d", i), core.PerHour(10))
		}
		time.Sleep(3 * ReportInterval)
		synctest.Wait()
		want := "WARN memstore: keys evicted with usage: their next requests start with a whole quota; raise WithMaxKeys above the keys active within a period store=memstore count=50 keys=256 max_keys=256"
		if got := logs.all(); len(got) != 1 || got[0] != want {
			t.Errorf("50 lossy evictions logged %q, want one line: %q", got, want)
		}
	})
}

// WithObserver(nil) and WithLogger(nil) are a programmer's error that New
// names.
func TestNewPanicsOnNilObserverOrLogger(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  Option
		want string
	}{
		{"a nil observer", WithObserver(nil), "memstore: New: WithObserver(nil)"},
		{"a nil logger", WithLogger(nil), "memstore: New: WithLogger(nil): to log nothing, pass slog.New(slog.DiscardHandler)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if got := recover(); got != c.want {
					t.Errorf("New(%s) panicked with %v, want %q", c.name, got, c.want)
				}
			}()
			New(c.opt).Close()
		})
	}
}
