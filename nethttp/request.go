package nethttp

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/keyfuncs"
)

// request is the keyfuncs.Request of an *http.Request. It is pointer
// shaped, so converting it to the interface allocates nothing, and it lets
// the options below reach the *http.Request again.
type request struct{ r *http.Request }

var _ keyfuncs.UnixSocketRequest = request{}

func (x request) Method() string { return keyfuncs.FromHTTP(x.r).Method() }
func (x request) Path() string   { return keyfuncs.FromHTTP(x.r).Path() }
func (x request) Route() string  { return x.r.Pattern }

// RoutePattern implements guard.RoutePatterner: the pattern of the route
// that answers, r.Pattern, when the middleware runs inside the mux that
// matched it. A pattern of a subtree ("/api/", chi's "/api/*") or with a
// wildcard of many segments ("/files/{path...}") is that of a mounted mux
// or of many routes, not known to answer, and so is "".
func (x request) RoutePattern() string {
	p := x.r.Pattern
	if p == "" || strings.HasSuffix(p, "/") || strings.HasSuffix(p, "*") || strings.HasSuffix(p, "...}") {
		return ""
	}
	return p
}
func (x request) Header(name string) string         { return x.r.Header.Get(name) }
func (x request) HeaderValues(name string) []string { return x.r.Header.Values(name) }
func (x request) Query(name string) string          { return keyfuncs.FromHTTP(x.r).Query(name) }
func (x request) RemoteAddr() string                { return x.r.RemoteAddr }
func (x request) UnixSocket() bool                  { return keyfuncs.OnUnixSocket(x.r) }
func (x request) Context() context.Context          { return x.r.Context() }

// errNotHTTP is returned by the functions of KeyFunc when they are called
// with a request that does not come from this package.
var errNotHTTP = errors.New("nethttp: KeyFunc called with a request not from nethttp")

// Request returns the *http.Request behind r, a request the middleware of
// this package hands to key, cost and skip functions and to hooks; nil for
// any other keyfuncs.Request.
func Request(r keyfuncs.Request) *http.Request {
	if x, ok := r.(request); ok {
		return x.r
	}
	return nil
}

// KeyFunc adapts a key function over *http.Request to a keyfuncs.Func, for
// WithRule, guard.Optional and keyfuncs.Join (WithKeyFunc takes such a
// function as is):
//
//	nethttp.WithRule(userLim, guard.Optional(nethttp.KeyFunc(func(r *http.Request) (string, error) {
//		return userFrom(r.Context()), nil
//	})))
//
// KeyFunc(nil) is nil, which WithKey and WithRule reject.
func KeyFunc(fn func(r *http.Request) (string, error)) keyfuncs.Func {
	if fn == nil {
		return nil
	}
	return func(r keyfuncs.Request) (string, error) {
		hr := Request(r)
		if hr == nil {
			return "", errNotHTTP
		}
		return fn(hr)
	}
}
