package topk_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/topk"
)

// report is the JSON a Handler serves.
type report struct {
	Keys     string    `json:"keys"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	Total    int64     `json:"total"`
	Capacity int       `json:"capacity"`
	Bound    int64     `json:"bound"`
	Top      []struct {
		Key   string `json:"key"`
		Long  bool   `json:"long"`
		Count int64  `json:"count"`
		Error int64  `json:"error"`
	} `json:"top"`
}

func get(t *testing.T, h http.Handler, target string) (*httptest.ResponseRecorder, report) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
	var rep report
	if w.Code == http.StatusOK {
		dec := json.NewDecoder(w.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rep); err != nil {
			t.Fatalf("GET %s: body does not parse: %v", target, err)
		}
	}
	return w, rep
}

func newHandler(t *testing.T, tr *topk.Tracker, opts ...topk.HandlerOption) *topk.Handler {
	t.Helper()
	h, err := topk.NewHandler(tr, opts...)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	return h
}

// handlerTracker holds alice ×3, bob ×2, a long key ×1, on a fixed clock.
func handlerTracker(t *testing.T) (*topk.Tracker, string) {
	t.Helper()
	clock := &fakeClock{now: epoch}
	tr := newTracker(t, topk.WithClock(clock), topk.WithCapacity(4))
	long := strings.Repeat("k", 200)
	for _, k := range []string{"alice", "bob", "alice", long, "bob", "alice"} {
		tr.Denied(k, 1)
	}
	clock.Set(epoch.Add(90 * time.Second))
	return tr, long
}

func TestHandlerServesTheSnapshot(t *testing.T) {
	tr, long := handlerTracker(t)
	h := newHandler(t, tr, topk.WithRawKeys(true))
	w, rep := get(t, h, "/debug/topk")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("GET = %d %v, want 200 with JSON, not cached", w.Code, w.Header())
	}
	d := sha256.Sum256([]byte(long))
	type e struct {
		key   string
		long  bool
		count int64
	}
	var got []e
	for _, x := range rep.Top {
		got = append(got, e{x.Key, x.Long, x.Count})
	}
	want := []e{{"alice", false, 3}, {"bob", false, 2}, {hex.EncodeToString(d[:]), true, 1}}
	if rep.Keys != "raw" || rep.Total != 6 || rep.Capacity != 4 || rep.Bound != 0 || len(got) != len(want) {
		t.Fatalf("report = %+v, want raw keys, total 6, capacity 4, bound 0, %v", rep, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("top[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if !rep.Since.Equal(epoch) || !rep.Until.Equal(epoch.Add(90*time.Second)) {
		t.Errorf("period [%v, %v], want [%v, %v]", rep.Since, rep.Until, epoch, epoch.Add(90*time.Second))
	}
}

func TestHandlerHidesKeysByDefault(t *testing.T) {
	tr, long := handlerTracker(t)
	h := newHandler(t, tr)
	w, rep := get(t, h, "/")
	for _, k := range []string{"alice", "bob", long} {
		if strings.Contains(w.Body.String(), k) {
			t.Errorf("body %s shows the raw key %q", w.Body, k)
		}
	}
	if rep.Keys != "hmac-sha256" || len(rep.Top) != 3 {
		t.Fatalf("report = %+v, want 3 hashed keys", rep)
	}
	for i, k := range []string{"alice", "bob", long} {
		if rep.Top[i].Key != h.KeyID(k) {
			t.Errorf("top[%d].key = %q, want KeyID(%.10q) = %q", i, rep.Top[i].Key, k, h.KeyID(k))
		}
	}
	if other := newHandler(t, tr); other.KeyID("alice") == h.KeyID("alice") {
		t.Errorf("two handlers with random secrets show alice as the same ID %q", h.KeyID("alice"))
	}
}

func TestHandlerWithSecretShowsStableIDs(t *testing.T) {
	tr, _ := handlerTracker(t)
	secret := []byte("0123456789abcdef-shared-by-the-fleet")
	a := newHandler(t, tr, topk.WithHashSecret(secret))
	b := newHandler(t, newTracker(t), topk.WithHashSecret(secret))
	if a.KeyID("alice") != b.KeyID("alice") {
		t.Errorf("KeyID(alice) = %q and %q with one secret, want equal", a.KeyID("alice"), b.KeyID("alice"))
	}
	if a.KeyID("alice") == a.KeyID("bob") {
		t.Errorf("KeyID(alice) = KeyID(bob) = %q", a.KeyID("alice"))
	}
	// A short key equal to a long key's digest is another key.
	long := strings.Repeat("k", 200)
	d := sha256.Sum256([]byte(long))
	if a.KeyID(long) == a.KeyID(string(d[:])) {
		t.Errorf("a long key and the bytes of its digest share the ID %q", a.KeyID(long))
	}
}

func TestHandlerK(t *testing.T) {
	tr, _ := handlerTracker(t)
	h := newHandler(t, tr, topk.WithDefaultK(2))
	cases := []struct {
		target string
		status int
		keys   int
	}{
		{"/", 200, 2},
		{"/?k=1", 200, 1},
		{"/?k=4", 200, 3},
		{"/?k=0", 400, 0},
		{"/?k=-1", 400, 0},
		{"/?k=5", 400, 0},
		{"/?k=two", 400, 0},
		{"/?k=", 400, 0},
	}
	for _, c := range cases {
		t.Run("GET "+c.target+" answers "+http.StatusText(c.status), func(t *testing.T) {
			w, rep := get(t, h, c.target)
			if w.Code != c.status || len(rep.Top) != c.keys {
				t.Fatalf("GET %s = %d with %d keys, want %d with %d", c.target, w.Code, len(rep.Top), c.status, c.keys)
			}
			if c.status != 200 {
				var p struct {
					Status int    `json:"status"`
					Detail string `json:"detail"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != c.status || !strings.Contains(p.Detail, "k") ||
					w.Header().Get("Content-Type") != "application/problem+json" {
					t.Fatalf("GET %s: body %s (%v), want a problem+json about k", c.target, w.Body, err)
				}
			}
		})
	}
}

func TestHandlerRejectsOtherMethods(t *testing.T) {
	tr, _ := handlerTracker(t)
	w := httptest.NewRecorder()
	newHandler(t, tr).ServeHTTP(w, httptest.NewRequest("POST", "/", nil))
	if w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST = %d, Allow %q; want 405, GET, HEAD", w.Code, w.Header().Get("Allow"))
	}
}

func TestNewHandlerRejectsInvalidOptions(t *testing.T) {
	tr := newTracker(t, topk.WithCapacity(8))
	cases := []struct {
		name   string
		tr     *topk.Tracker
		opts   []topk.HandlerOption
		option string
	}{
		{"a nil tracker", nil, nil, "nil Tracker"},
		{"a short secret", tr, []topk.HandlerOption{topk.WithHashSecret([]byte("short"))}, "WithHashSecret"},
		{"raw keys and a secret", tr, []topk.HandlerOption{topk.WithRawKeys(true), topk.WithHashSecret(make([]byte, 32))}, "WithRawKeys"},
		{"k of zero", tr, []topk.HandlerOption{topk.WithDefaultK(0)}, "WithDefaultK"},
		{"k above the capacity", tr, []topk.HandlerOption{topk.WithDefaultK(9)}, "WithDefaultK"},
	}
	for _, c := range cases {
		t.Run(c.name+" is an error naming it", func(t *testing.T) {
			h, err := topk.NewHandler(c.tr, c.opts...)
			if !errors.Is(err, topk.ErrInvalidOption) || !strings.Contains(err.Error(), c.option) {
				t.Fatalf("NewHandler(%s) = %v, %v; want an error wrapping ErrInvalidOption naming %s", c.name, h, err, c.option)
			}
		})
	}
}
