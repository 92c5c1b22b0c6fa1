package conformance

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/nethttp"
)

// parseList parses a header's field lines as an sf-list, the way a client
// would.
func parseList(t *testing.T, h http.Header, name string) (httpsfv.List, bool) {
	t.Helper()
	vals := h.Values(name)
	if len(vals) == 0 {
		return nil, false
	}
	l, err := httpsfv.UnmarshalList(vals)
	if err != nil {
		t.Fatalf("%s: %q is not an RFC 9651 list: %v", name, vals, err)
	}
	return l, true
}

// param returns the integer parameter key of it.
func param(t *testing.T, it httpsfv.Item, key string) int64 {
	t.Helper()
	v, ok := it.Params.Get(key)
	if !ok {
		t.Fatalf("item %v has no %s", it.Value, key)
	}
	n, ok := v.(int64)
	if !ok || n < 0 {
		t.Fatalf("item %v: %s = %#v, want a non-negative sf-integer", it.Value, key, v)
	}
	return n
}

// checkDraft11 parses RateLimit-Policy and RateLimit as a client would and
// checks their shape: every item an sf-string name with integer q/w (r/t),
// qu an sf-string when present, names unique in each list, every RateLimit
// item naming a policy, and, on a 429, Retry-After not earlier than the t
// of the item of each violated policy (draft-11 §6). RateLimit-Policy may
// come alone: a FailOpen decision lists its policies but has no numbers
// for a RateLimit item, and neither has a cost that can never pass.
func checkDraft11(t *testing.T, h http.Header, status int, body []byte) {
	t.Helper()
	policies, hasPolicy := parseList(t, h, "RateLimit-Policy")
	limits, hasLimit := parseList(t, h, "RateLimit")
	if hasLimit && !hasPolicy {
		t.Fatalf("RateLimit present without RateLimit-Policy")
	}
	names := map[string]bool{}
	for _, m := range policies {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("RateLimit-Policy member %#v is not an item", m)
		}
		name, ok := it.Value.(string)
		if !ok {
			t.Fatalf("RateLimit-Policy item %#v is not an sf-string", it.Value)
		}
		if names[name] {
			t.Errorf("RateLimit-Policy %q names %q twice", h.Values("RateLimit-Policy"), name)
		}
		names[name] = true
		param(t, it, "q")
		if param(t, it, "w") < 1 {
			t.Errorf("policy %q: w must be at least 1", name)
		}
		if qu, ok := it.Params.Get("qu"); ok {
			if _, ok := qu.(string); !ok {
				t.Errorf("policy %q: qu = %#v, want an sf-string", name, qu)
			}
		}
	}
	ts := map[string]int64{}
	for _, m := range limits {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("RateLimit member %#v is not an item", m)
		}
		name, ok := it.Value.(string)
		if !ok || !names[name] {
			t.Errorf("RateLimit item %#v names no policy of %v", it.Value, names)
		}
		if _, dup := ts[name]; dup {
			t.Errorf("RateLimit %q has two items for %q", h.Values("RateLimit"), name)
		}
		param(t, it, "r")
		ts[name] = param(t, it, "t")
	}
	ra := h.Get("Retry-After")
	if status != 429 || ra == "" {
		return
	}
	secs, err := strconv.ParseInt(ra, 10, 64)
	if err != nil || secs < 1 {
		t.Errorf("Retry-After %q is not a positive delta-seconds", ra)
	}
	var p struct {
		Violated []string `json:"violated-policies"`
	}
	if json.Unmarshal(body, &p) != nil {
		return // a DeniedHandler's own body
	}
	for _, name := range p.Violated {
		if tv, ok := ts[name]; ok && tv > secs {
			t.Errorf("Retry-After %d is earlier than the t=%d of the violated policy %q", secs, tv, name)
		}
	}
}

// TestConformanceHeadersParse runs the shared table through nethttp, its
// layers around nested muxes, and parses every header with httpsfv.
func TestConformanceHeadersParse(t *testing.T) {
	guardtest.Run(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
		route := wrap(cfg.App, cfg.In(guardtest.OnRoute))
		api := http.NewServeMux()
		api.Handle(guardtest.RoutePath, route)
		api.Handle(guardtest.GroupPath, cfg.App)
		mux := http.NewServeMux()
		mux.Handle(guardtest.GroupPrefix+"/", wrap(api, cfg.In(guardtest.Grouped)))
		mux.Handle("/", cfg.App)
		return wrap(mux, cfg.In(guardtest.AppWide))
	}, checkHeaders)
}

// wrap puts h behind the middlewares of layers, the first outermost.
func wrap(h http.Handler, layers []guardtest.Layer) http.Handler {
	for i := len(layers) - 1; i >= 0; i-- {
		h = nethttp.New(layers[i].Limiter, layers[i].Options...)(h)
	}
	return h
}

// checkHeaders parses the rate-limit headers of a response of the table
// as a client would: draft-11 lists with checkDraft11, a draft-06 policy
// as a list of integer items with w, each quota once.
func checkHeaders(t *testing.T, _ *guardtest.Case, _ *guardtest.Step, resp *http.Response, body []byte) {
	t.Helper()
	if resp.Header.Get("RateLimit-Limit") == "" {
		checkDraft11(t, resp.Header, resp.StatusCode, body)
		return
	}
	p := resp.Header.Values("RateLimit-Policy")
	if len(p) == 0 {
		return
	}
	l, err := httpsfv.UnmarshalList(p)
	if err != nil {
		t.Fatalf("draft-06 RateLimit-Policy %q: %v", p, err)
	}
	quotas := map[int64]bool{}
	for _, m := range l {
		q, ok := m.(httpsfv.Item).Value.(int64)
		if !ok {
			t.Errorf("draft-06 policy item %#v is not an integer", m)
		}
		if quotas[q] {
			t.Errorf("draft-06 RateLimit-Policy %q lists the quota %d twice", p, q)
		}
		quotas[q] = true
		param(t, m.(httpsfv.Item), "w")
	}
}

// stubStore answers every operation with r.
type stubStore struct{ r engine.Result }

func (s stubStore) Apply(context.Context, engine.Op) (engine.Result, error) { return s.r, nil }
func (stubStore) Close() error                                              { return nil }

// validLimit makes a valid limit of fuzzed numbers: a printable name of at
// most core.MaxNameLen bytes (core.New rejects others), a quota and a
// period within bounds.
func validLimit(name string, quota, period int64) core.Limit {
	b := []byte(clean(name))
	q := min(max(quota, 1), core.MaxQuota)
	p := time.Duration(min(max(period, int64(time.Microsecond)), int64(core.MaxPeriod))).Truncate(time.Microsecond)
	l := core.Per(q, p).Named(string(b))
	if l.Validate() != nil { // too large to compute exactly
		l.Quota = 1
	}
	return l
}

// FuzzHeadersParse feeds hostile decisions (any valid names and quotas,
// any remaining, resets and retries) through the Guard and parses the
// headers with httpsfv: the encoder must always produce valid Structured
// Fields, and the names a client reads back must be the limits' names.
func FuzzHeadersParse(f *testing.F) {
	f.Add("per-minute", "per-hour", int64(100), int64(60e9), int64(42), int64(17e9), int64(3e9), false)
	f.Add(`a"b\c`, "\r\n\x00\xff", int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), true)
	f.Add("", "é", int64(1)<<62, int64(core.Never), int64(1)<<62, int64(core.Never), int64(core.Never), true)
	f.Fuzz(func(t *testing.T, name1, name2 string, quota, period, rem, reset, retry int64, denied bool) {
		l1 := validLimit(name1, quota, period)
		l2 := validLimit(name2, quota/2, period*2)
		if l1.PolicyName() == l2.PolicyName() {
			l2 = l2.Named(l1.PolicyName() + "-2")
			if len(l2.Name) > core.MaxNameLen {
				l2.Name = "second"
			}
		}
		parts := []engine.LimitResult{
			{Allowed: !denied, Remaining: rem, Reset: reset / 1000, Window: reset / 3000, Retry: retry / 1000},
			{Allowed: true, Remaining: rem / 2, Reset: reset / 2000, Window: reset / 5000},
		}
		r := engine.Result{Allowed: !denied, Remaining: rem, Reset: reset / 1000, Window: reset / 3000, Retry: retry / 1000, Limits: parts}
		if denied {
			r.Retry = retry / 1000
		}
		clock := guardtest.NewClock(guardtest.Epoch)
		lim, err := core.New(stubStore{r}, core.WithClock(clock), l1, l2)
		if err != nil {
			t.Fatal(err)
		}
		for _, style := range []guard.HeaderStyle{guard.HeadersDraft11, guard.HeadersDraft06} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/", nil)
			nethttp.New(lim, guard.WithHeaders(style))(http.NotFoundHandler()).ServeHTTP(rec, req)
			h := rec.Header()
			if style == guard.HeadersDraft11 {
				checkDraft11(t, h, rec.Code, rec.Body.Bytes())
				l, _ := parseList(t, h, "RateLimit-Policy")
				if len(l) != 2 {
					t.Fatalf("RateLimit-Policy has %d items, want 2: %q", len(l), h.Values("RateLimit-Policy"))
				}
				if got, want := l[0].(httpsfv.Item).Value.(string), clean(l1.PolicyName()); got != want {
					t.Errorf("policy name read back as %q, want %q", got, want)
				}
			} else if _, err := httpsfv.UnmarshalList(h.Values("RateLimit-Policy")); err != nil {
				t.Errorf("draft-06 RateLimit-Policy %q: %v", h.Values("RateLimit-Policy"), err)
			}
			if ra := h.Get("Retry-After"); ra != "" {
				if n, err := strconv.ParseInt(ra, 10, 64); err != nil || n < 1 {
					t.Errorf("Retry-After %q", ra)
				}
			}
		}
	})
}

// clean is the documented name mapping: cut at core.MaxNameLen bytes,
// bytes outside printable ASCII replaced by '?'.
func clean(s string) string {
	if len(s) > core.MaxNameLen {
		s = s[:core.MaxNameLen]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}
