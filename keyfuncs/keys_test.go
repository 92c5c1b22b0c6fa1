package keyfuncs

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

type userID string

func (u userID) String() string { return "user:" + string(u) }

type ptrStringer struct{ id string }

func (p *ptrStringer) String() string { return p.id }

type ctxKey struct{}

func TestValueKeys(t *testing.T) {
	atMax := strings.Repeat("k", MaxKeyLen)
	tooLong := atMax + "k"
	req := func(mod func(*fakeRequest)) *fakeRequest {
		r := &fakeRequest{method: "GET", path: "/users/42", route: "/users/:id", remote: "192.0.2.1:1",
			header: http.Header{"X-Api-Key": {"secret", "second"}, "X-Empty": {""}},
			query:  url.Values{"token": {"t1", "t2"}, "empty": {""}},
		}
		if mod != nil {
			mod(r)
		}
		return r
	}
	withCtx := func(v any) *fakeRequest {
		return req(func(r *fakeRequest) { r.ctx = context.WithValue(context.Background(), ctxKey{}, v) })
	}
	tests := []struct {
		name    string
		fn      Func
		req     *fakeRequest
		want    string
		wantErr error
	}{
		{name: "Header returns the first value", fn: Header("X-API-Key"), req: req(nil), want: "secret"},
		{name: "Header matches the name case-insensitively", fn: Header("x-api-key"), req: req(nil), want: "secret"},
		{name: "Header without the header is no key", fn: Header("Authorization"), req: req(nil), wantErr: ErrNoKey},
		{name: "Header with an empty value is no key", fn: Header("X-Empty"), req: req(nil), wantErr: ErrNoKey},
		{name: "Header accepts MaxKeyLen bytes", fn: Header("X-Big"), req: req(func(r *fakeRequest) { r.header.Set("X-Big", atMax) }), want: atMax},
		{name: "Header rejects a longer value", fn: Header("X-Big"), req: req(func(r *fakeRequest) { r.header.Set("X-Big", tooLong) }), wantErr: ErrKeyTooLong},
		{name: "Header rejects a 1 MB value", fn: Header("X-Big"), req: req(func(r *fakeRequest) { r.header.Set("X-Big", strings.Repeat("x", 1<<20)) }), wantErr: ErrKeyTooLong},

		{name: "Query returns the first value", fn: Query("token"), req: req(nil), want: "t1"},
		{name: "Query without the parameter is no key", fn: Query("other"), req: req(nil), wantErr: ErrNoKey},
		{name: "Query with an empty value is no key", fn: Query("empty"), req: req(nil), wantErr: ErrNoKey},
		{name: "Query rejects a longer value", fn: Query("big"), req: req(func(r *fakeRequest) { r.query.Set("big", tooLong) }), wantErr: ErrKeyTooLong},

		{name: "Route returns the pattern", fn: Route(), req: req(nil), want: "/users/:id"},
		{name: "Route without a route is no key, not the path", fn: Route(), req: req(func(r *fakeRequest) { r.route = "" }), wantErr: ErrNoKey},
		{name: "Method returns the method", fn: Method(), req: req(nil), want: "GET"},
		{name: "Method without a method is no key", fn: Method(), req: req(func(r *fakeRequest) { r.method = "" }), wantErr: ErrNoKey},
		{name: "Path returns the path", fn: Path(), req: req(nil), want: "/users/42"},
		{name: "Path rejects a longer path", fn: Path(), req: req(func(r *fakeRequest) { r.path = "/" + tooLong }), wantErr: ErrKeyTooLong},
		{name: "Static returns its string", fn: Static("global"), req: req(nil), want: "global"},

		{name: "ContextValue returns a string", fn: ContextValue(ctxKey{}), req: withCtx("alice"), want: "alice"},
		{name: "ContextValue formats a Stringer", fn: ContextValue(ctxKey{}), req: withCtx(userID("alice")), want: "user:alice"},
		{name: "ContextValue formats a pointer Stringer", fn: ContextValue(ctxKey{}), req: withCtx(&ptrStringer{"bob"}), want: "bob"},
		{name: "ContextValue with a nil pointer Stringer is no key", fn: ContextValue(ctxKey{}), req: withCtx((*ptrStringer)(nil)), wantErr: ErrNoKey},
		{name: "ContextValue without the value is no key", fn: ContextValue(ctxKey{}), req: req(nil), wantErr: ErrNoKey},
		{name: "ContextValue with an empty string is no key", fn: ContextValue(ctxKey{}), req: withCtx(""), wantErr: ErrNoKey},
		{name: "ContextValue with another type is no key", fn: ContextValue(ctxKey{}), req: withCtx(42), wantErr: ErrNoKey},
		{name: "ContextValue rejects a longer value", fn: ContextValue(ctxKey{}), req: withCtx(tooLong), wantErr: ErrKeyTooLong},

		{name: "Join joins the parts with the separator", fn: Join("|", Method(), Route(), Header("X-API-Key")), req: req(nil), want: "GET|/users/:id|secret"},
		{name: "Join of one part is that part", fn: Join("|", Route()), req: req(nil), want: "/users/:id"},
		{name: "Join of more than eight parts joins them all", fn: Join("", Static("a"), Static("b"), Static("c"), Static("d"), Static("e"), Static("f"), Static("g"), Static("h"), Static("i")), req: req(nil), want: "abcdefghi"},
		{name: "Join fails when a part has no key", fn: Join("|", Method(), Header("Authorization")), req: req(nil), wantErr: ErrNoKey},
		{name: "Join fails when a part is too long", fn: Join("|", Method(), Path()), req: req(func(r *fakeRequest) { r.path = tooLong }), wantErr: ErrKeyTooLong},
		{name: "Join of an empty part is no key", fn: Join("", func(Request) (string, error) { return "", nil }), req: req(nil), wantErr: ErrNoKey},
		{name: "Join with IP keys the client", fn: Join("|", IP(), Route()), req: req(nil), want: "192.0.2.1|/users/:id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fn(tt.req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || got != "" {
					t.Fatalf("key = %.40q, %v; want error %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("key = %.40q, %v; want %.40q", got, err, tt.want)
			}
		})
	}
}

// A key function that no request could satisfy is a programmer error:
// it fails where it is built, with a message that names it, and not as
// a 400 on every request.
func TestKeyFuncsThatCanNeverKeyPanicWhenBuilt(t *testing.T) {
	for _, tt := range []struct {
		name  string
		build func()
		want  string
	}{
		{"Header of an empty name", func() { Header("") }, "keyfuncs: Header: empty header name"},
		{"Query of an empty name", func() { Query("") }, "keyfuncs: Query: empty parameter name"},
		{"Static of the empty string", func() { Static("") }, "keyfuncs: Static: empty key"},
		{"Join of no functions", func() { Join("|") }, "keyfuncs: Join: no key functions"},
		{"Join with a nil function", func() { Join("|", Method(), nil) }, "keyfuncs: Join: nil Func at index 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != tt.want {
					t.Errorf("panic = %v, want %q", r, tt.want)
				}
			}()
			tt.build()
		})
	}
}

func TestJoinCopiesItsParts(t *testing.T) {
	fns := []Func{Static("a"), Static("b")}
	fn := Join("|", fns...)
	fns[1] = Static("changed")
	if got, err := fn(&fakeRequest{}); got != "a|b" || err != nil {
		t.Errorf("Join(...) after changing the caller's slice = %q, %v; want %q", got, err, "a|b")
	}
}

func TestValueKeyErrorsNameTheirSource(t *testing.T) {
	_, err := Header("X-API-Key")(&fakeRequest{header: http.Header{}})
	if err == nil || !strings.Contains(err.Error(), `"X-API-Key"`) {
		t.Errorf("Header(%q) error = %v, want it to name the header as configured", "X-API-Key", err)
	}
	_, err = Header("X-Big")(&fakeRequest{header: http.Header{"X-Big": {strings.Repeat("x", 1<<20)}}})
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("Header(%q) error has %d bytes, want a short error without the value", "X-Big", len(err.Error()))
	}
}

// The errors of Header, Query, Route, Method and Path are SourceErrors: a
// caller (guard.ErrorDetail) can tell the client which part of its request
// is missing or too long, and never its value.
func TestValueKeyErrorsAreSourceErrors(t *testing.T) {
	long := strings.Repeat("v", MaxKeyLen+1)
	tests := []struct {
		name       string
		fn         Func
		r          *fakeRequest
		kind, part string
		sentinel   error
	}{
		// The name as configured, not canonical: the 400 names it so.
		{"a missing header", Header("x-api-key"), &fakeRequest{header: http.Header{}}, "header", "x-api-key", ErrNoKey},
		{"a header too long", Header("X-API-Key"), &fakeRequest{header: http.Header{"X-Api-Key": {long}}}, "header", "X-API-Key", ErrKeyTooLong},
		{"a missing query parameter", Query("key"), &fakeRequest{}, "query parameter", "key", ErrNoKey},
		{"no route", Route(), &fakeRequest{}, "route", "", ErrNoKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.fn(tt.r)
			var se *SourceError
			if !errors.As(err, &se) || !errors.Is(err, tt.sentinel) {
				t.Fatalf("error %v: want a *SourceError matching %v", err, tt.sentinel)
			}
			if se.Kind != tt.kind || se.Name != tt.part {
				t.Errorf("SourceError = {%q, %q}, want {%q, %q}", se.Kind, se.Name, tt.kind, tt.part)
			}
			if strings.Contains(err.Error(), long) {
				t.Errorf("error %.80q... holds the value", err)
			}
		})
	}
}
