package keyfuncs

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestFromHTTP(t *testing.T) {
	raw := "POST /users/42?token=a%20b&x=1 HTTP/1.1\r\n" +
		"Host: example.com\r\n" +
		"x-fOrWaRdEd-FoR: 6.6.6.6, 198.51.100.1\r\n" +
		"X-FORWARDED-FOR: 10.0.0.2\r\n" +
		"x-api-key: secret\r\n" +
		"\r\n"
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	r.RemoteAddr = "10.0.0.1:443"
	type key struct{}
	r = r.WithContext(context.WithValue(r.Context(), key{}, "v"))
	req := FromHTTP(r)

	if got, want := req.Method(), "POST"; got != want {
		t.Errorf("Method() = %q, want %q", got, want)
	}
	if got, want := req.Path(), "/users/42"; got != want {
		t.Errorf("Path() = %q, want %q", got, want)
	}
	if got, want := req.Route(), ""; got != want {
		t.Errorf("Route() = %q, want %q", got, want)
	}
	if got, want := req.Header("X-Api-Key"), "secret"; got != want {
		t.Errorf("Header(%q) = %q, want %q", "X-Api-Key", got, want)
	}
	if got, want := req.HeaderValues("X-Forwarded-For"), []string{"6.6.6.6, 198.51.100.1", "10.0.0.2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("HeaderValues(%q) = %q, want %q", "X-Forwarded-For", got, want)
	}
	if got, want := req.Query("token"), "a b"; got != want {
		t.Errorf("Query(%q) = %q, want %q", "token", got, want)
	}
	if got, want := req.RemoteAddr(), "10.0.0.1:443"; got != want {
		t.Errorf("RemoteAddr() = %q, want %q", got, want)
	}
	if got := req.Context().Value(key{}); got != "v" {
		t.Errorf("Context().Value(key) = %v, want %q", got, "v")
	}

	// Mixed-case header names on the wire reach IP as field lines, in order.
	got, err := IP(mustTrustCIDRs(t, "10.0.0.0/8"))(req)
	if want := "198.51.100.1"; err != nil || got != want {
		t.Errorf("IP(trust 10/8) = %q, %v; want %q", got, err, want)
	}
}

// mustTrustCIDRs is TrustProxyCIDRs for literal CIDRs in tests.
func mustTrustCIDRs(t *testing.T, cidrs ...string) IPOption {
	t.Helper()
	opt, err := TrustProxyCIDRs(cidrs...)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

func TestFromHTTPRouteFromServeMux(t *testing.T) {
	var route, path string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		req := FromHTTP(r)
		route, path = req.Route(), req.Path()
	})
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/users/42", nil))
	if want := "GET /users/{id}"; route != want {
		t.Errorf("Route() = %q, want %q", route, want)
	}
	if want := "/users/42"; path != want {
		t.Errorf("Path() = %q, want %q", path, want)
	}
}

func TestFromHTTPDefaultsAndNilURL(t *testing.T) {
	req := FromHTTP(&http.Request{Header: http.Header{}})
	if got := req.Method(); got != "GET" {
		t.Errorf("Method() of an empty method = %q, want %q", got, "GET")
	}
	if got := req.Path(); got != "" {
		t.Errorf("Path() without a URL = %q, want %q", got, "")
	}
	if got := req.Query("x"); got != "" {
		t.Errorf("Query(%q) without a URL = %q, want %q", "x", got, "")
	}
	if got := req.Context(); got == nil {
		t.Errorf("Context() = nil, want a context")
	}
}

func TestQueryGet(t *testing.T) {
	tests := []struct {
		query, name string
	}{
		{"a=1", "a"},
		{"a=1&a=2", "a"},
		{"b=1&a=2", "a"},
		{"a", "a"},
		{"a=", "a"},
		{"a=%zz&a=2", "a"},
		{"a%zz=1&a=2", "a"},
		{"a=1;b=2&a=3", "a"},
		{"a;=1&a=3", "a"},
		{"%61=1", "a"},
		{"a+b=c+d", "a b"},
		{"a=b%20c", "a"},
		{"&&a=1&&", "a"},
		{"=x", ""},
		{"", "a"},
		{"a=1", "b"},
	}
	for _, tt := range tests {
		v, _ := url.ParseQuery(tt.query)
		if got, want := queryGet(tt.query, tt.name), v.Get(tt.name); got != want {
			t.Errorf("queryGet(%q, %q) = %q, want %q", tt.query, tt.name, got, want)
		}
	}
}

func TestFromHTTPAllocations(t *testing.T) {
	r := httptest.NewRequest("GET", "/x?token=abc", nil)
	r.Header.Set("X-Api-Key", "secret")
	tests := []struct {
		name string
		fn   Func
	}{
		{"Header allocates nothing", Header("X-API-Key")},
		{"Query allocates nothing", Query("token")},
		{"Path allocates nothing", Path()},
		{"a missing header allocates nothing", Header("Authorization")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(100, func() { tt.fn(FromHTTP(r)) }); got != 0 {
				t.Errorf("AllocsPerRun = %v, want 0", got)
			}
		})
	}
}
