package rules

import (
	"net/http"
	"path"
	"sync/atomic"
)

// Middleware returns next limited by the running rules, for net/http (the
// standard mux, chi, anything that takes a func(http.Handler)
// http.Handler: Middleware is one):
//
//	http.ListenAndServe(addr, set.Middleware(mux))
//
// Each request goes to the route whose match pattern it matches, as
// net/http's ServeMux matches patterns (method, host, path, wildcards; the
// most specific pattern wins), through that route's limiters, in order,
// with its cost, and the file's header style; then to next. A request that
// matches no route, or a route without limiters, goes to next unlimited:
// add a "/" route to limit everything. A path that is not clean
// (/api//x, /x/../api/y) matches the route of its clean form; a path that
// ServeMux would redirect to add a slash (/api, for the pattern /api/)
// matches no route. The rate-limit headers, 429s and error responses are
// those of package nethttp.
//
// The middleware reads the running rules on every request, so Apply and
// Reload change everything it does, header style included.
func (s *Set) Middleware(next http.Handler) http.Handler {
	return &handler{set: s, next: next}
}

type handler struct {
	set   *Set
	next  http.Handler
	bound atomic.Pointer[bound]
}

// bound is a table's routes wrapped around next.
type bound struct {
	t  *table
	hs []http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := h.set.table.Load()
	b := h.bound.Load()
	if b == nil || b.t != t {
		b = &bound{t: t, hs: make([]http.Handler, len(t.routes))}
		for i, rt := range t.routes {
			if rt.mw != nil {
				b.hs[i] = rt.mw(h.next)
			}
		}
		h.bound.Store(b)
	}
	if i := t.match(r); i >= 0 && b.hs[i] != nil {
		b.hs[i].ServeHTTP(w, r)
		return
	}
	h.next.ServeHTTP(w, r)
}

// routeIndex is the handler a table's mux holds for each route: the
// route's index. It is matched, never served.
type routeIndex int

func (routeIndex) ServeHTTP(http.ResponseWriter, *http.Request) {}

// match returns the index of the route of r, or -1.
func (t *table) match(r *http.Request) int {
	h, pattern := t.mux.Handler(r)
	if i, ok := h.(routeIndex); ok {
		return int(i)
	}
	// ServeMux answers a path that is not clean with a redirect to its
	// clean form, and names the pattern that form matches.
	if p := r.URL.EscapedPath(); r.Method != http.MethodConnect && cleanPath(p) != p {
		if i, ok := t.index[pattern]; ok {
			return i
		}
	}
	return -1
}

// cleanPath is p as ServeMux cleans it: rooted, without . and ..
// elements or repeated slashes, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}
