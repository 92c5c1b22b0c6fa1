package keyfuncs

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// FromHTTP returns the Request view of r for the key functions of this
// package. r must not be nil. The view reads r without copying it and
// allocates nothing.
//
// Route returns r.Pattern, which the standard ServeMux (Go 1.22 and later)
// sets to the whole registered pattern, e.g. "GET /users/{id}"; it is "" for
// other routers. Method returns "GET" when r.Method is empty, as net/http
// does. Query looks the parameter up in r.URL.RawQuery without parsing the
// whole query, with the semantics of r.URL.Query().Get(name).
func FromHTTP(r *http.Request) Request { return httpRequest{r} }

// httpRequest is pointer-shaped, so converting it to Request allocates nothing.
type httpRequest struct{ r *http.Request }

func (h httpRequest) Method() string {
	if h.r.Method == "" {
		return http.MethodGet
	}
	return h.r.Method
}

func (h httpRequest) Path() string {
	if h.r.URL == nil {
		return ""
	}
	return h.r.URL.Path
}

func (h httpRequest) Route() string                     { return h.r.Pattern }
func (h httpRequest) Header(name string) string         { return h.r.Header.Get(name) }
func (h httpRequest) HeaderValues(name string) []string { return h.r.Header.Values(name) }
func (h httpRequest) RemoteAddr() string                { return h.r.RemoteAddr }
func (h httpRequest) UnixSocket() bool                  { return OnUnixSocket(h.r) }
func (h httpRequest) Context() context.Context          { return h.r.Context() }

func (h httpRequest) Query(name string) string {
	if h.r.URL == nil {
		return ""
	}
	return queryGet(h.r.URL.RawQuery, name)
}

// queryGet returns url.ParseQuery(query).Get(name) without building the map:
// pairs are separated by '&', a pair containing ';' or an invalid escape is
// skipped, and the first value of the first matching pair is returned.
// It allocates only to unescape a matching value, or a key with escapes.
func queryGet(query, name string) string {
	for query != "" {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, err := url.QueryUnescape(k)
		if err != nil || k != name {
			continue
		}
		v, err = url.QueryUnescape(v)
		if err != nil {
			continue
		}
		return v
	}
	return ""
}
