package rules_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/rules"
)

// t0 is the fixed instant of the tests' clock: a day boundary, so a
// boundary of every window the tests use.
var t0 = time.Unix(1_700_006_400, 0)

// fixedClock is a core.Clock that only moves when told to.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixedClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer is a bytes.Buffer safe for concurrent writes, for logs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// fixture is a Set running a rules file in a temporary directory, on a
// memstore, on a fixed clock, logging to a buffer.
type fixture struct {
	path  string
	store *memstore.Store
	set   *rules.Set
	clock *fixedClock
	log   *syncBuffer
}

// newFixture writes src to rules.yaml and opens it.
func newFixture(t *testing.T, src string, opts ...rules.Option) *fixture {
	t.Helper()
	clock := &fixedClock{now: t0}
	f := &fixture{
		path:  filepath.Join(t.TempDir(), "rules.yaml"),
		store: memstore.New(memstore.WithClock(clock)), // its expiry on the same clock
		clock: clock,
		log:   &syncBuffer{},
	}
	t.Cleanup(func() { f.store.Close() })
	f.write(t, src)
	opts = append([]rules.Option{rules.WithClock(f.clock), rules.WithLogger(slog.New(slog.NewTextHandler(f.log, nil)))}, opts...)
	set, err := rules.Open(f.store, f.path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { set.Close() })
	f.set = set
	return f
}

// write replaces the rules file with src.
func (f *fixture) write(t *testing.T, src string) {
	t.Helper()
	if err := os.WriteFile(f.path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reload writes src and reloads it, which must succeed.
func (f *fixture) reload(t *testing.T, src string) {
	t.Helper()
	f.write(t, src)
	if err := f.set.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
}

// remaining returns what key has left under the named limiter's binding
// limit, from Peek.
func (f *fixture) remaining(t *testing.T, limiter, key string) int64 {
	t.Helper()
	lim := f.set.Limiter(limiter)
	if lim == nil {
		t.Fatalf("Limiter(%q) = nil", limiter)
	}
	d, err := lim.Peek(context.Background(), key)
	if err != nil {
		t.Fatalf("Peek(%q) = %v", key, err)
	}
	return d.Remaining
}

// do sends a request through the Set's middleware to a handler that
// answers 200, from client 192.0.2.1 unless a header pair says otherwise,
// and returns the response.
func (f *fixture) do(method, path string, header ...string) *httptest.ResponseRecorder {
	return serve(f.set.Middleware(ok), method, path, header...)
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })

// serve sends one request to h; header holds name, value pairs, and
// "RemoteAddr" sets the peer address (default 192.0.2.1:1234).
func serve(h http.Handler, method, path string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "RemoteAddr" {
			r.RemoteAddr = header[i+1]
			continue
		}
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// failingStore is a store that is down: every Apply fails.
type failingStore struct{}

var errDown = errors.New("store down")

func (failingStore) Apply(context.Context, engine.Op) (engine.Result, error) {
	return engine.Result{}, errDown
}
func (failingStore) Close() error { return nil }
