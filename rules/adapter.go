package rules

import (
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
)

// Options returns the Limiter and options of the named route (its name,
// or its match pattern when it has none) for an adapter other than
// net/http's:
//
//	lim, opts, err := set.Options("search")
//	r.POST("/search", ginlimit.New(lim, opts...), search)
//
// The limits of the route's limiters (their plans included) stay live:
// every reload applies to them. What the adapter's middleware holds from
// then on is fixed while the program runs: the route's limiters, their
// keys and failure policies, its cost and dry run, and the header style.
// A later Apply or Reload that would change one of those, or remove the
// route, is rejected with an error wrapping ErrFrozen that names the
// route and the setting; restart the program to change them. (Middleware
// has no such limit: it reads the running rules on every request.)
//
// It returns an error wrapping ErrUnknownRoute when the running rules have
// no such route, or the route has no limiters (leave it unwrapped).
func (s *Set) Options(route string) (*core.Limiter, []guard.Option, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.table.Load()
	i, ok := t.byName[route]
	if !ok {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownRoute, route)
	}
	rt := t.routes[i]
	if rt.lim == nil {
		return nil, nil, fmt.Errorf("%w %q: it has no limiters", ErrUnknownRoute, route)
	}
	s.frozen[route] = t.cfg.fingerprint(rt.spec)
	return rt.lim, append([]guard.Option(nil), rt.opts...), nil
}

// frozenRoute is what an adapter's middleware holds of a route.
type frozenRoute struct {
	headers  string
	cost     int64
	dryRun   bool
	limiters []string // name, key and failure policy of each
}

func (c *Config) fingerprint(r *routeSpec) frozenRoute {
	f := frozenRoute{headers: styleName(c.headers), cost: r.cost, dryRun: r.dryRun}
	for _, name := range r.limiters {
		ls := c.limiters[name]
		f.limiters = append(f.limiters, fmt.Sprintf("%s (key %s; failure %v)", name, c.describeKey(ls.key, r), ls.failure))
	}
	return f
}

func styleName(s guard.HeaderStyle) string {
	for name, v := range headerStyles {
		if v == s {
			return name
		}
	}
	return fmt.Sprint(s)
}

// checkFrozen reports how cfg would change the routes handed out by
// Options. s.mu is held.
func (s *Set) checkFrozen(cfg *Config) error {
	var problems []string
	for _, name := range sortedKeys(s.frozen) {
		was := s.frozen[name]
		var now frozenRoute
		found := false
		for _, r := range cfg.routes {
			if r.name == name {
				now, found = cfg.fingerprint(r), true
				break
			}
		}
		change := func(what string, from, to any) {
			problems = append(problems, fmt.Sprintf("route %q: %s cannot change from %v to %v", name, what, from, to))
		}
		switch {
		case !found:
			problems = append(problems, fmt.Sprintf("route %q cannot be removed", name))
			continue
		case len(now.limiters) == 0:
			problems = append(problems, fmt.Sprintf("route %q cannot lose its limiters", name))
			continue
		}
		if was.headers != now.headers {
			change("headers", was.headers, now.headers)
		}
		if was.cost != now.cost {
			change("cost", was.cost, now.cost)
		}
		if was.dryRun != now.dryRun {
			change("dry_run", was.dryRun, now.dryRun)
		}
		if w, n := strings.Join(was.limiters, ", "), strings.Join(now.limiters, ", "); w != n {
			change("limiters", "["+w+"]", "["+n+"]")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: an adapter's middleware holds it (Options): %s; restart to apply", ErrFrozen, strings.Join(problems, "; "))
}
