package rules_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// endToEnd is the rules file of TestMiddlewareEndToEnd.
const endToEnd = `
headers: draft-11
keys:
  ip:
    ip: {trusted_proxies: [loopback]}
  user: {header: X-User, optional: true}
  ip-route: {join: [ip, route]}
limiters:
  per-ip: {limits: 3/m name per-ip}
  per-route: {key: ip-route, limits: 2/m name per-route}
  users: {key: user, limits: 1/m name per-user}
routes:
  - {match: /, limiters: per-ip}
  - {match: POST /search, limiters: [per-ip], cost: 2}
  - {match: GET /healthz, limiters: []}
  - {match: /a, limiters: per-route}
  - {match: /b, limiters: per-route}
  - {match: /me, limiters: [per-route, users]}
`

// TestMiddlewareEndToEnd serves a rules file's middleware over a real
// HTTP server and checks, request by request, statuses and headers.
func TestMiddlewareEndToEnd(t *testing.T) {
	f := newFixture(t, endToEnd)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })
	srv := httptest.NewServer(f.set.Middleware(mux))
	defer srv.Close()

	type step struct {
		method, path string
		header       []string // name, value pairs
		status       int
		policy       string // RateLimit-Policy contains this ("-": absent)
		limit        string // RateLimit contains this
	}
	send := func(t *testing.T, s step) {
		t.Helper()
		req, err := http.NewRequest(s.method, srv.URL+s.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(s.header); i += 2 {
			req.Header.Set(s.header[i], s.header[i+1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		what := s.method + " " + s.path + " " + strings.Join(s.header, " ")
		if resp.StatusCode != s.status {
			t.Errorf("%s = %d, want %d", what, resp.StatusCode, s.status)
		}
		policy := resp.Header.Get("RateLimit-Policy")
		switch {
		case s.policy == "-" && policy != "":
			t.Errorf("%s: RateLimit-Policy %q, want none", what, policy)
		case s.policy != "-" && !strings.Contains(policy, s.policy):
			t.Errorf("%s: RateLimit-Policy %q, want it to contain %q", what, policy, s.policy)
		}
		if got := resp.Header.Get("RateLimit"); !strings.Contains(got, s.limit) {
			t.Errorf("%s: RateLimit %q, want it to contain %q", what, got, s.limit)
		}
	}
	// The server's peer is loopback, a trusted proxy: X-Forwarded-For
	// names the client.
	alice := []string{"X-Forwarded-For", "198.51.100.1"}
	bob := []string{"X-Forwarded-For", "198.51.100.2"}
	steps := []struct {
		name string
		step
	}{
		{"the catch-all route limits a client", step{"GET", "/anything", alice, 200, `"per-ip";q=3;w=60`, `"per-ip";r=2;t=`}},
		{"a costly route takes its cost from the same limiter", step{"POST", "/search", alice, 200, `"per-ip"`, `"per-ip";r=0;`}},
		{"the limiter is spent for the client", step{"GET", "/", alice, 429, `"per-ip"`, `"per-ip";r=0;`}},
		{"another client has its own quota", step{"GET", "/", bob, 200, `"per-ip"`, `"per-ip";r=2;`}},
		{"a route without limiters passes without headers", step{"GET", "/healthz", alice, 200, "-", ""}},
		{"a method the route does not match falls to the catch-all", step{"GET", "/search", bob, 200, `"per-ip"`, `"per-ip";r=1;`}},
		{"a route key counts each route apart", step{"GET", "/a", alice, 200, `"per-route";q=2`, `"per-route";r=1;`}},
		{"the same limiter on another route", step{"GET", "/b", alice, 200, `"per-route"`, `"per-route";r=1;`}},
		{"an optional key that is missing skips its limiter", step{"GET", "/me", alice, 200, `"per-route"`, `"per-route";r=1;`}},
		{"an optional key that is present applies its limiter", step{"GET", "/me", append([]string{"X-User", "u1"}, alice...), 200, `"per-user";q=1`, `"per-user";r=0;`}},
		{"which then denies the key for another client", step{"GET", "/me", append([]string{"X-User", "u1"}, bob...), 429, `"per-user"`, `"per-user";r=0;`}},
		{"refunding that client's first rule", step{"GET", "/me", bob, 200, `"per-route"`, `"per-route";r=1;`}},
	}
	for _, s := range steps {
		send(t, s.step)
		if t.Failed() {
			t.Fatalf("at step %q", s.name)
		}
	}

	// A reload changes the header style, the routes and the limits; the
	// clients' usage stays.
	f.reload(t, strings.NewReplacer("headers: draft-11", "headers: legacy", "3/m name per-ip", "4/m name per-ip").Replace(endToEnd))
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Header.Set("X-Forwarded-For", "198.51.100.1")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "4" || resp.Header.Get("X-RateLimit-Remaining") != "0" || resp.Header.Get("RateLimit-Policy") != "" {
		t.Errorf("after a reload to legacy headers and 4/m, GET / = %d, X-RateLimit-Limit %q, X-RateLimit-Remaining %q, RateLimit-Policy %q; want 200, 4, 0 and none",
			resp.StatusCode, resp.Header.Get("X-RateLimit-Limit"), resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("RateLimit-Policy"))
	}
}

func TestMiddlewarePassesRequestsNoRouteMatches(t *testing.T) {
	f := newFixture(t, "limiters:\n  a: {limits: 1/m}\nroutes:\n  - {match: /api/, limiters: a}\n")
	for _, path := range []string{"/", "/other", "/api"} {
		for range 3 {
			if w := f.do("GET", path); w.Code != http.StatusOK || w.Header().Get("RateLimit-Policy") != "" {
				t.Fatalf("GET %s = %d with RateLimit-Policy %q, want 200 unlimited", path, w.Code, w.Header().Get("RateLimit-Policy"))
			}
		}
	}
	if w := f.do("GET", "/api/x"); w.Code != http.StatusOK {
		t.Errorf("GET /api/x = %d, want 200", w.Code)
	}
	for _, path := range []string{"/api/y", "/api//y", "/other/../api/y"} {
		if w := f.do("GET", path); w.Code != http.StatusTooManyRequests {
			t.Errorf("GET %s = %d, want 429: /api/ is one route, for clean paths or not", path, w.Code)
		}
	}
}

// TestTrustedProxiesUnix keys requests from a proxy on a Unix socket (as
// net/http serves them: RemoteAddr "@", the socket as the local address in
// the context) by the client its X-Forwarded-For names, when the rules
// file trusts unix; without it they have no key, a 500.
func TestTrustedProxiesUnix(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, tt := range []struct {
		name, trust string
		want        []int // alice, alice again, bob
	}{
		{"trusted", "[unix]", []int{200, 429, 200}},
		{"not trusted", "[loopback]", []int{500, 500, 500}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "keys:\n  ip:\n    ip: {trusted_proxies: "+tt.trust+"}\nlimiters:\n  per-ip: {limits: 1/m}\nroutes:\n  - {match: /, limiters: per-ip}\n")
			h := f.set.Middleware(ok)
			for i, client := range []string{"198.51.100.1", "198.51.100.1", "198.51.100.2"} {
				r := httptest.NewRequest("GET", "/", nil)
				r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.UnixAddr{Name: "/run/app.sock", Net: "unix"}))
				r.RemoteAddr = "@"
				r.Header.Set("X-Forwarded-For", client)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != tt.want[i] {
					t.Errorf("request %d, client %s: %d, want %d", i, client, w.Code, tt.want[i])
				}
			}
		})
	}
}
