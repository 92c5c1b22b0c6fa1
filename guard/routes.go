package guard

import (
	"sync"
	"sync/atomic"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/keyfuncs"
)

// maxRoutes bounds the routes a Guard remembers the inner policies of.
const maxRoutes = 1024

// A RoutePatterner is a keyfuncs.Request that knows which route will
// answer it before the handler runs, when that differs from its Route:
// fiber's Route of middleware added with app.Use is the prefix of that
// call, not the route that answers. A Guard remembers the policies of the
// middlewares inside it per RoutePattern (or, for other requests, per
// Route), to list them on the 429s it answers itself (see WithHeaders).
type RoutePatterner interface {
	keyfuncs.Request
	// RoutePattern returns the pattern of the route that will answer the
	// request, e.g. "/users/:id", or "" when it is not known yet.
	RoutePattern() string
}

// routeOf returns the route pattern of r, known before the handler runs,
// or "".
func routeOf(r keyfuncs.Request) string {
	if p, ok := r.(RoutePatterner); ok {
		return p.RoutePattern()
	}
	return r.Route()
}

// routeMemory remembers, per route, the limits that the middlewares
// inside a Guard listed on the last request of the route that passed them
// all: at most maxRoutes routes. Readers take no lock.
type routeMemory struct {
	mu sync.Mutex // serializes writers
	m  atomic.Pointer[map[string][]core.Limit]
}

// inner returns the limits remembered for route.
func (rm *routeMemory) inner(route string) []core.Limit {
	if route == "" {
		return nil
	}
	if m := rm.m.Load(); m != nil {
		return (*m)[route]
	}
	return nil
}

// mayLearn reports whether learn has anything to check after the
// middlewares inside g: entries of ch other than its first mark (those
// they added, or fewer than mark, which learn turns away), or routes
// remembered before. Most requests have neither, and pass asks this in
// line before it calls learn.
func (g *Guard) mayLearn(ch *chainState, mark int) bool {
	return mark != len(ch.entries) || g.routes.m.Load() != nil
}

// learn remembers the limits of the entries that the middlewares inside g
// added to ch, from index mark on, for r's route, unless r was stopped.
// Its callers check mayLearn first.
func (g *Guard) learn(r keyfuncs.Request, ch *chainState, mark int) {
	if ch.stopped || mark > len(ch.entries) {
		return
	}
	inner := ch.entries[mark:]
	m := g.routes.m.Load()
	route := routeOf(r)
	if route == "" {
		return
	}
	var known []core.Limit
	var ok bool
	if m != nil {
		known, ok = (*m)[route]
	}
	if ok == (len(inner) > 0) && sameLimits(inner, known) {
		return
	}
	var limits []core.Limit
	for i := range inner {
		for j, n := 0, inner[i].numLimits(); j < n; j++ {
			limits = append(limits, *inner[i].limit(j))
		}
	}
	g.routes.store(route, limits)
}

// sameLimits reports whether the limits of entries are limits.
func sameLimits(entries []entry, limits []core.Limit) bool {
	n := 0
	for i := range entries {
		for j, k := 0, entries[i].numLimits(); j < k; j++ {
			if n >= len(limits) || *entries[i].limit(j) != limits[n] {
				return false
			}
			n++
		}
	}
	return n == len(limits)
}

// store sets (or, for no limits, forgets) the limits of route, in a copy
// of the map: writes are rare, once per route and change.
func (rm *routeMemory) store(route string, limits []core.Limit) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	var old map[string][]core.Limit
	if p := rm.m.Load(); p != nil {
		old = *p
	}
	if _, ok := old[route]; !ok && (len(limits) == 0 || len(old) >= maxRoutes) {
		return
	}
	m := make(map[string][]core.Limit, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	if len(limits) == 0 {
		delete(m, route)
	} else {
		m[route] = limits
	}
	rm.m.Store(&m)
}
