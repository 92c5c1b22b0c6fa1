package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
)

// eventLog is a core.Observer that keeps the events it sees.
type eventLog struct {
	mu sync.Mutex
	ev []core.Event
}

func (o *eventLog) ObserveDecision(context.Context, *core.Observation) {}
func (o *eventLog) ObserveEvent(_ context.Context, e *core.Event) {
	o.mu.Lock()
	o.ev = append(o.ev, *e)
	o.mu.Unlock()
}

// count returns the events of kind and the sum of their Counts.
func (o *eventLog) count(kind core.EventKind) (events []core.Event, sum int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.ev {
		if e.Kind == kind {
			events = append(events, e)
			sum += e.Count
		}
	}
	return events, sum
}

// textLog is a slog.Handler that keeps each record as text.
type textLog struct {
	mu sync.Mutex
	l  []string
}

func (h *textLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *textLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	h.l = append(h.l, b.String())
	h.mu.Unlock()
	return nil
}
func (h *textLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *textLog) WithGroup(string) slog.Handler      { return h }

func (h *textLog) lines() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.l, "\n")
}

// observedModes runs fn with the options of an unbatched and a batched
// store.
func observedModes(t *testing.T, fn func(t *testing.T, opts ...Option)) {
	t.Run("unbatched", func(t *testing.T) { fn(t, WithBatching(0, 0)) })
	t.Run("batched", func(t *testing.T) { fn(t, WithBatching(32, 2)) })
}

// A Redis that refuses connections, behind a client that retries its dial
// (go-redis's default): the caller gives up at its timeout, and sees only
// that; the store sees the refusal in the client's dial, and reports it,
// so the log says "connect: connection refused".
func TestLateFailuresReportTheRealCause(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: freeAddr(t), ContextTimeoutEnabled: true}) // DialerRetries: 5
	defer c.Close()
	observedModes(t, func(t *testing.T, opts ...Option) {
		obs, storeLog, limLog := &eventLog{}, &textLog{}, &textLog{}
		// Without the warm-up, whose dials (no caller waits on them) are not
		// the subject here.
		s := newStore(t, c, append(opts, WithObserver(obs), WithLogger(slog.New(storeLog)), WithWarmup(0, 0))...)
		lim, err := core.New(s, core.PerSecond(10), core.WithTimeout(20*time.Millisecond),
			core.WithFailurePolicy(core.FailOpen), core.WithLogger(slog.New(limLog)))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := lim.Allow(context.Background(), "k"); err != nil || d.Source != core.FromFailOpen {
			t.Fatalf("Allow on a refusing Redis = %+v, %v; want FailOpen's decision", d, err)
		}
		if !strings.Contains(limLog.lines(), "error=context deadline exceeded") {
			t.Fatalf("the Limiter logged %q, want its timeout (the premise of this test: the dial outlasts it)", limLog.lines())
		}
		deadline := time.Now().Add(10 * time.Second)
		var failures []core.Event
		for time.Now().Before(deadline) && len(failures) == 0 {
			time.Sleep(10 * time.Millisecond)
			failures, _ = obs.count(core.EventStoreFailure)
		}
		for _, e := range failures {
			if !errors.Is(e.Err, syscall.ECONNREFUSED) || e.Store != "redisstore" {
				t.Errorf("store failure event %+v, want the refusal", e)
			}
		}
		if len(failures) == 0 {
			t.Fatal("no store failure event within 10s")
		}
		want := "WARN redisstore: could not connect to Redis error=dial tcp " + c.Options().Addr + ": connect: connection refused"
		if got, _, _ := strings.Cut(storeLog.lines(), "\n"); got != want {
			t.Errorf("the store logged %q first, want %q", got, want)
		}
	})
}

// The store reports each script load.
func TestScriptLoadsAreReported(t *testing.T) {
	c := newClient(t)
	observedModes(t, func(t *testing.T, opts ...Option) {
		obs, logs := &eventLog{}, &textLog{}
		s := newStore(t, c, append(opts, WithObserver(obs), WithLogger(slog.New(logs)))...)
		if err := c.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		lim, err := core.New(s, core.PerSecond(10))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := lim.Allow(context.Background(), "k"); err != nil {
				t.Fatal(err)
			}
		}
		loads, n := obs.count(core.EventScriptLoad)
		if len(loads) != 1 || n != 1 || loads[0].Store != "redisstore" {
			t.Errorf("script load events after SCRIPT FLUSH and 3 decisions = %+v, want one, of one script", loads)
		}
		if want := "DEBUG redisstore: loaded the script, which the server had lost"; logs.lines() != want {
			t.Errorf("the store logged %q, want %q", logs.lines(), want)
		}
	})
}

func TestNewRejectsNilObserverAndLogger(t *testing.T) {
	c := redis.NewClient(clientOptions(freeAddr(t)))
	defer c.Close()
	for _, opt := range []Option{WithObserver(nil), WithLogger(nil)} {
		if _, err := New(c, opt); !errors.Is(err, ErrConfig) {
			t.Errorf("New with a nil observer or logger = %v, want ErrConfig", err)
		}
	}
}

// A store hooks into its client to report failed dials; a client outlives
// the stores made on it (a store per tenant, a new one at each
// configuration reload), so a closed store must not stay reachable from
// the client: here 50 stores made, used and closed on one client are all
// collected, on one server (batched and not) and on a Cluster, whose node
// clients get hooks too.
func TestClosedStoresAreNotKeptByTheirClient(t *testing.T) {
	clients := []struct {
		name string
		c    Client
		opts []Option
	}{
		{"one server", newClient(t), nil},
		{"one server, unbatched", newClient(t), []Option{WithBatching(0, 0)}},
		{"a cluster", newClusterClient(t), nil},
	}
	for _, cc := range clients {
		t.Run(cc.name, func(t *testing.T) {
			var collected atomic.Int64
			const n = 50
			for i := range n {
				s, err := New(cc.c, append([]Option{WithPrefix(testPrefix())}, cc.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				lim, err := core.New(s, core.PerSecond(10))
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range []string{"a", "b", "c", fmt.Sprint(i)} { // several cluster nodes
					if _, err := lim.Allow(context.Background(), k); err != nil {
						t.Fatal(err)
					}
				}
				deleteKeys(cc.c, s.prefix)
				s.Close()
				runtime.AddCleanup(s, func(*atomic.Int64) { collected.Add(1) }, &collected)
			}
			deadline := time.Now().Add(10 * time.Second)
			for collected.Load() < n && time.Now().Before(deadline) {
				runtime.GC()
				time.Sleep(10 * time.Millisecond)
			}
			if got := collected.Load(); got < n {
				t.Errorf("%d of %d closed stores were collected; the client keeps the others", got, n)
			}
		})
	}
}
