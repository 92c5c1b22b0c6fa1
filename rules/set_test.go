package rules_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/rules"
)

// guardWithNilHook is a guard option that guard.New rejects.
func guardWithNilHook() guard.Option { return guard.WithOnDenied(nil) }

// twoLimiters is a rules file with limiters a and b, on routes /a and /b;
// %A and %B stand for their limits.
const twoLimiters = `
limiters:
  a: {limits: "%A"}
  b: {limits: "%B"}
routes:
  - {match: /a, limiters: a}
  - {match: /b, limiters: b}
`

func limitsOf(a, b string) string {
	return strings.NewReplacer("%A", a, "%B", b).Replace(twoLimiters)
}

const client = "192.0.2.1" // the key of the fixture's requests

func TestReloadKeepsState(t *testing.T) {
	tests := []struct {
		name   string
		a, b   string // the limits after the reload
		remain int64  // what client has left of a, having used 3 of 5
	}{
		{"of a limiter when another changed", "5/m", "20/m", 2},
		{"of a limiter when nothing changed", "5/m", "10/m", 2},
		{"when the quota changed", "10/m", "10/m", 7},
		{"when the quota went down", "4/m", "10/m", 1},
		{"when the quota of a GCRA's burst changed", "5/m gcra burst 9", "10/m", 6},
		{"but not when the period changed", "5/h", "10/m", 5},
		{"but not when the algorithm changed", "5/m fixed-window", "10/m", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := "5/m"
			if strings.Contains(tt.a, "gcra") {
				before = "5/m gcra"
			}
			f := newFixture(t, limitsOf(before, "10/m"))
			for range 3 {
				if w := f.do("GET", "/a"); w.Code != http.StatusOK {
					t.Fatalf("GET /a = %d, want 200", w.Code)
				}
			}
			if got := f.remaining(t, "a", client); got != 2 {
				t.Fatalf("before the reload, Peek(%q).Remaining = %d, want 2", client, got)
			}
			lim := f.set.Limiter("a")
			f.reload(t, limitsOf(tt.a, tt.b))
			if got := f.remaining(t, "a", client); got != tt.remain {
				t.Errorf("after the reload to %q, Peek(%q).Remaining = %d, want %d", tt.a, client, got, tt.remain)
			}
			if f.set.Limiter("a") != lim {
				t.Errorf("the reload replaced limiter a's core.Limiter, want it kept")
			}
		})
	}
}

func TestReloadOfAFailurePolicyKeepsState(t *testing.T) {
	f := newFixture(t, limitsOf("5/m", "10/m"))
	for range 3 {
		f.do("GET", "/a")
	}
	lim := f.set.Limiter("a")
	f.reload(t, "failure: {timeout: 250ms}\n"+limitsOf("5/m", "10/m"))
	if f.set.Limiter("a") == lim {
		t.Errorf("a reload that changed the timeout kept the core.Limiter, want a new one")
	}
	if got := f.remaining(t, "a", client); got != 2 {
		t.Errorf("after a reload of the timeout, Peek(%q).Remaining = %d, want 2", client, got)
	}
	if got := f.set.Limiter("a").Name(); got != "a" {
		t.Errorf("Limiter(a).Name() = %q, want a", got)
	}
}

func TestReloadOfABadFileKeepsTheRunningRules(t *testing.T) {
	var reported []error
	f := newFixture(t, limitsOf("5/m", "10/m"), rules.WithOnReload(func(err error) { reported = append(reported, err) }))
	for range 3 {
		f.do("GET", "/a")
	}
	running := f.set.Config()

	bad := []struct {
		name string
		src  string // "" removes the file
		want string
	}{
		{"a limit that does not validate", limitsOf("0/m", "10/m"), f.path + ":3: limiters.a.limits: quota 0 must be at least 1"},
		{"a syntax error", "limiters: [\n", f.path + ":1: did not find expected node content"},
		{"a missing file", "", "no such file or directory"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if tt.src == "" {
				os.Remove(f.path)
			} else {
				f.write(t, tt.src)
			}
			err := f.set.Reload()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Reload() = %v, want an error saying %q", err, tt.want)
			}
			if f.set.Config() != running {
				t.Errorf("after a failed reload, Config() changed")
			}
			if got := f.remaining(t, "a", client); got != 2 {
				t.Errorf("after a failed reload, Peek(%q).Remaining = %d, want 2", client, got)
			}
			if w := f.do("GET", "/a"); w.Code != http.StatusOK || !strings.Contains(w.Header().Get("RateLimit"), `"5-per-1m";r=1;`) {
				t.Errorf("after a failed reload, GET /a = %d %q, want 200 with r=1 of the old 5/m", w.Code, w.Header().Get("RateLimit"))
			}
			if got := f.log.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "rules not applied; the running rules stay") {
				t.Errorf("log = %q, want an error line for the failed reload", got)
			}
			if len(reported) == 0 || reported[len(reported)-1] != err {
				t.Errorf("WithOnReload's function got %v, want the error of Reload", reported)
			}
			// Refund the request of this case, so that each case starts at 2.
			f.set.Limiter("a").Refund(context.Background(), client, 1)
		})
	}

	f.reload(t, limitsOf("6/m", "10/m"))
	if got := f.remaining(t, "a", client); got != 3 {
		t.Errorf("after the file is fixed, Peek(%q).Remaining = %d, want 3 of 6", client, got)
	}
	if reported[len(reported)-1] != nil {
		t.Errorf("WithOnReload's function got %v after a good reload, want nil", reported[len(reported)-1])
	}
	if got := f.log.String(); !strings.Contains(got, "level=INFO msg=\"tollgate: rules applied\"") {
		t.Errorf("log = %q, want an info line for the reload", got)
	}
}

func TestReloadNeedsAFile(t *testing.T) {
	cfg, err := rules.Parse("inline.yaml", []byte(limitsOf("5/m", "10/m")))
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	defer store.Close()
	set, err := rules.New(store, cfg, rules.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Reload(); !errors.Is(err, rules.ErrNoFile) {
		t.Errorf("Reload() = %v, want ErrNoFile", err)
	}
	if err := set.Watch(context.Background(), time.Second); !errors.Is(err, rules.ErrNoFile) {
		t.Errorf("Watch() = %v, want ErrNoFile", err)
	}
	if err := set.ReloadOn(context.Background()); !errors.Is(err, rules.ErrNoFile) {
		t.Errorf("ReloadOn() = %v, want ErrNoFile", err)
	}
	next, err := rules.Parse("inline.yaml", []byte(limitsOf("7/m", "10/m")))
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Apply(next); err != nil {
		t.Fatalf("Apply() = %v", err)
	}
	if got := set.Limiter("a").Limits(context.Background(), "k"); got[0].Quota != 7 {
		t.Errorf("after Apply, limiter a's limits = %v, want 7/m", got)
	}
}

func TestNewRejects(t *testing.T) {
	cfg, err := rules.Parse("r.yaml", []byte(limitsOf("5/m", "10/m")))
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	defer store.Close()
	tests := []struct {
		name  string
		store core.Store
		cfg   *rules.Config
		opts  []rules.Option
	}{
		{"a nil store", nil, cfg, nil},
		{"a nil Config", store, nil, nil},
		{"a nil logger", store, cfg, []rules.Option{rules.WithLogger(nil)}},
		{"a nil clock", store, cfg, []rules.Option{rules.WithClock(nil)}},
		{"a nil fallback store", store, cfg, []rules.Option{rules.WithFallbackStore(nil)}},
		{"a nil reload function", store, cfg, []rules.Option{rules.WithOnReload(nil)}},
		{"an invalid limiter option", store, cfg, []rules.Option{rules.WithLimiterOptions(core.WithTimeout(-1))}},
		{"an invalid guard option", store, cfg, []rules.Option{rules.WithGuardOptions(guardWithNilHook())}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if set, err := rules.New(tt.store, tt.cfg, tt.opts...); err == nil {
				t.Errorf("New() = %v, nil; want an error", set)
			}
		})
	}
}

func TestOptionsFreezesWhatTheAdapterHolds(t *testing.T) {
	const src = `
headers: %H
limiters:
  api: {key: apikey, limits: "%L"}
  other: {limits: 1/s}
keys:
  apikey: {header: X-API-Key}
routes:
  - {match: POST /search, name: search, limiters: api, cost: %C}
  - {match: /free, limiters: []}
`
	file := func(headers, limits, cost string) string {
		return strings.NewReplacer("%H", headers, "%L", limits, "%C", cost).Replace(src)
	}
	f := newFixture(t, file("draft-11", "10/m", "2"))
	lim, opts, err := f.set.Options("search")
	if err != nil {
		t.Fatalf("Options(search) = %v", err)
	}
	if lim != f.set.Limiter("api") || len(opts) == 0 {
		t.Fatalf("Options(search) = %p, %d options; want limiter api's Limiter and its options", lim, len(opts))
	}

	frozen := []struct {
		name, src, want string
	}{
		{"a new cost", file("draft-11", "10/m", "3"), `route "search": cost cannot change from 2 to 3`},
		{"a new header style", file("legacy", "10/m", "2"), `route "search": headers cannot change from draft-11 to legacy`},
		{"a new key", strings.Replace(file("draft-11", "10/m", "2"), "X-API-Key", "X-Key", 1), `route "search": limiters cannot change from [api (key header "X-API-Key"; failure closed)] to [api (key header "X-Key"; failure closed)]`},
		{"another limiter", strings.Replace(file("draft-11", "10/m", "2"), "limiters: api,", "limiters: [api, other],", 1), `limiters cannot change`},
		{"a removed route", strings.Replace(file("draft-11", "10/m", "2"), "name: search", "name: find", 1), `route "search" cannot be removed`},
	}
	for _, tt := range frozen {
		t.Run("rejects "+tt.name, func(t *testing.T) {
			f.write(t, tt.src)
			err := f.set.Reload()
			if !errors.Is(err, rules.ErrFrozen) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Reload() = %v, want ErrFrozen saying %q", err, tt.want)
			}
		})
	}

	t.Run("applies new limits", func(t *testing.T) {
		f.reload(t, file("draft-11", "3/m", "2"))
		if got := lim.Limits(context.Background(), "k"); len(got) != 1 || got[0].Quota != 3 {
			t.Errorf("the Options Limiter's limits = %v, want 3/m", got)
		}
	})

	for _, name := range []string{"nope", "/free"} {
		if _, _, err := f.set.Options(name); !errors.Is(err, rules.ErrUnknownRoute) {
			t.Errorf("Options(%q) = %v, want ErrUnknownRoute", name, err)
		}
	}
}

func TestPlans(t *testing.T) {
	const src = `
keys:
  apikey: {header: X-API-Key}
limiters:
  by-header:
    key: apikey
    limits: 2/m
    plan: {header: X-Plan}
    plans: {pro: 5/m}
  by-prefix:
    key: apikey
    limits: 2/m
    plan: {key_prefix: _}
    plans: {pro: 5/m}
routes:
  - {match: /h, limiters: by-header}
  - {match: /p, limiters: by-prefix}
`
	f := newFixture(t, src)
	// admitted counts the requests that pass out of 10.
	admitted := func(path string, header ...string) int {
		n := 0
		for range 10 {
			if f.do("GET", path, header...).Code == http.StatusOK {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name   string
		path   string
		header []string
		want   int
	}{
		{"a key on no plan header gets the limiter's limits", "/h", []string{"X-API-Key", "k1"}, 2},
		{"a key on the pro plan header gets pro's", "/h", []string{"X-API-Key", "k1", "X-Plan", "pro"}, 5},
		{"a key on an unknown plan gets the limiter's limits", "/h", []string{"X-API-Key", "k2", "X-Plan", "gold"}, 2},
		{"an unknown plan counts with no plan", "/h", []string{"X-API-Key", "k2"}, 0},
		{"a key whose prefix is no plan gets the limiter's limits", "/p", []string{"X-API-Key", "free_k1"}, 2},
		{"a key whose prefix is pro gets pro's", "/p", []string{"X-API-Key", "pro_k1"}, 5},
		{"a key without the separator gets the limiter's limits", "/p", []string{"X-API-Key", "pro"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := admitted(tt.path, tt.header...); got != tt.want {
				t.Errorf("%s with %q: %d of 10 admitted, want %d", tt.path, tt.header, got, tt.want)
			}
		})
	}

	t.Run("a reload of a plan's quota keeps its usage", func(t *testing.T) {
		f.reload(t, strings.Replace(src, "plans: {pro: 5/m}\nroutes", "plans: {pro: 7/m}\nroutes", 1))
		if got := admitted("/p", "X-API-Key", "pro_k1"); got != 2 {
			t.Errorf("pro_k1, 5 of 5 used, then 7/m: %d admitted, want 2", got)
		}
	})
}

func TestFailurePolicies(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		want   int
	}{
		{"closed answers 503", "{policy: closed}", http.StatusServiceUnavailable},
		{"open lets requests through", "{policy: open}", http.StatusOK},
		{"fallback decides on the fallback store", "{policy: fallback, fleet_size: 2}", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := rules.Parse("r.yaml", []byte("failure: "+tt.policy+"\n"+limitsOf("5/m", "10/m")))
			if err != nil {
				t.Fatal(err)
			}
			set, err := rules.New(failingStore{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			if w := serve(set.Middleware(ok), "GET", "/a"); w.Code != tt.want {
				t.Errorf("GET /a with the store down = %d, want %d", w.Code, tt.want)
			}
		})
	}

	t.Run("fallback uses WithFallbackStore", func(t *testing.T) {
		cfg, err := rules.Parse("r.yaml", []byte("failure: {policy: fallback, fleet_size: 5}\n"+limitsOf("5/m", "10/m")))
		if err != nil {
			t.Fatal(err)
		}
		fb := memstore.New()
		defer fb.Close()
		set, err := rules.New(failingStore{}, cfg, rules.WithFallbackStore(fb))
		if err != nil {
			t.Fatal(err)
		}
		defer set.Close()
		// 1/5 of 5 per minute: one request passes on the fallback store.
		codes := []int{serve(set.Middleware(ok), "GET", "/a").Code, serve(set.Middleware(ok), "GET", "/a").Code}
		if codes[0] != http.StatusOK || codes[1] != http.StatusTooManyRequests {
			t.Errorf("two requests with the store down = %v, want 200 then 429 (a fleet share of 1)", codes)
		}
	})
}

// TestRequestsDuringReloads serves requests from several goroutines while
// the rules reload, for the race detector, and checks that no request
// failed and that the final rules apply.
func TestRequestsDuringReloads(t *testing.T) {
	f := newFixture(t, limitsOf("1000/m", "1000/m"))
	h := f.set.Middleware(ok)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				path := "/a"
				if (g+i)%2 == 0 {
					path = "/b"
				}
				if w := serve(h, "GET", path); w.Code != http.StatusOK {
					errs <- path + ": " + http.StatusText(w.Code)
					return
				}
			}
		})
	}
	for i := range 20 {
		quota := "1000/m"
		if i%2 == 0 {
			quota = "2000/m"
		}
		f.reload(t, "headers: legacy\n"+limitsOf(quota, "1000/m"))
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a request during reloads: %s", e)
	}
	if w := serve(h, "GET", "/a"); w.Header().Get("X-RateLimit-Limit") != "1000" {
		t.Errorf("after the reloads, X-RateLimit-Limit = %q, want 1000 (the last file's)", w.Header().Get("X-RateLimit-Limit"))
	}
}
