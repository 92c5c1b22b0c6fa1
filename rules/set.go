package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
	"github.com/tollgate/tollgate/nethttp"
)

// A Set runs a Config on a store: one core.Limiter per limiter of the
// file, named after it (core.WithName, the scope of its keys in the
// store), and the guard options of each route. Middleware serves the
// routes to net/http; Options hands a route to another adapter.
//
// Apply and Reload swap in new rules while requests flow. Each limiter
// keeps its core.Limiter, which reads its limits through
// core.WithLimitsFunc from a snapshot swapped atomically, and so keeps the
// state of its keys in the store: a limit that did not change keeps its
// state, and so does one whose Quota or Burst changed (the store keys
// state by a limit's layout, engine.Limit.Ident, which says what a kept
// state means under new numbers for each algorithm); a limit whose
// algorithm, period or precision changed starts afresh. A limiter whose failure
// policy or timeout changed gets a new core.Limiter of the same name: its
// keys' state stays in the store, its circuit breaker starts closed. The
// routes swap as one table, after the limits.
//
// A Set is safe for concurrent use.
type Set struct {
	store core.Store
	set   settings
	table atomic.Pointer[table]

	mu          sync.Mutex // serializes Apply, Reload, Options and Close
	limiters    map[string]*managed
	frozen      map[string]frozenRoute // routes handed out by Options
	ownFallback core.Store             // created by the Set, closed by Close
	closed      bool
}

// managed is a limiter of the file and its core.Limiter.
type managed struct {
	lim     *core.Limiter
	failure failureSpec // what lim was built with
	cur     atomic.Pointer[plans]
}

// plans are a limiter's limits, per plan.
type plans struct {
	def    []core.Limit            // keys on no known plan
	by     map[string][]core.Limit // per plan
	header string                  // the plan is this header's value, prefixed to the key
	sep    string                  // the plan is the key up to sep; "" without plans
}

func snapshot(ls *limiterSpec) *plans {
	p := &plans{def: ls.limits, by: ls.plans}
	switch {
	case ls.planHeader != "":
		p.header, p.sep = ls.planHeader, planSep
	case ls.planPrefix != "":
		p.sep = ls.planPrefix
	}
	return p
}

// limits is the core.WithLimitsFunc of m's Limiter.
func (m *managed) limits(_ context.Context, key string) []core.Limit {
	p := m.cur.Load()
	if p.sep != "" {
		if plan, _, ok := strings.Cut(key, p.sep); ok {
			if ls, ok := p.by[plan]; ok {
				return ls
			}
		}
	}
	return p.def
}

// planKey prefixes the key of fn with the plan named by the request's plan
// header, when m's plans come from one: "pro:" + key, or ":" + key for a
// request on no known plan, so that no key can pass for another plan's.
func (m *managed) planKey(fn keyfuncs.Func) keyfuncs.Func {
	return func(r keyfuncs.Request) (string, error) {
		k, err := fn(r)
		if err != nil {
			return k, err
		}
		p := m.cur.Load()
		if p.header == "" {
			return k, nil
		}
		plan := r.Header(p.header)
		if _, ok := p.by[plan]; !ok {
			plan = ""
		}
		return plan + planSep + k, nil
	}
}

// table is what requests read: the routes of one Config.
type table struct {
	cfg    *Config
	mux    *http.ServeMux // the routes' patterns, to match requests
	index  map[string]int // pattern → routes index
	byName map[string]int // name → routes index
	routes []route
}

type route struct {
	spec *routeSpec
	lim  *core.Limiter // nil: a route without limiters, whose requests pass
	opts []guard.Option
	mw   func(http.Handler) http.Handler
}

var errClosed = errors.New("rules: Set closed")

// New returns a Set that runs cfg on store. It returns an error for a nil
// store or Config, an invalid option, or an option of WithLimiterOptions
// or WithGuardOptions that core.New or guard.New rejects.
func New(store core.Store, cfg *Config, opts ...Option) (*Set, error) {
	if store == nil || cfg == nil {
		return nil, errors.New("rules: New: nil store or Config")
	}
	s := &Set{store: store, set: settings{logger: slog.Default()}, frozen: map[string]frozenRoute{}}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&s.set); err != nil {
			return nil, err
		}
	}
	if err := s.apply(cfg); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Open is Load(path), then New: a Set that Reload, ReloadOn and Watch can
// reload from path.
func Open(store core.Store, path string, opts ...Option) (*Set, error) {
	cfg, err := Load(path)
	if err != nil {
		return nil, err
	}
	return New(store, cfg, opts...)
}

// Config returns the running rules.
func (s *Set) Config() *Config { return s.table.Load().cfg }

// Limiter returns the core.Limiter of the named limiter of the running
// rules, or nil: to Peek or Reset a key, say.
func (s *Set) Limiter(name string) *core.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.limiters[name]; m != nil {
		return m.lim
	}
	return nil
}

// Apply swaps in cfg as the running rules, keeping the state of the limits
// that did not change (see Set), and logs the outcome. On an error nothing
// changes: the running rules stay. It fails with an error wrapping
// ErrFrozen when cfg changes a route handed out by Options (see Options).
func (s *Set) Apply(cfg *Config) error {
	if cfg == nil {
		return errors.New("rules: Apply(nil)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.apply(cfg)
	s.log(cfg.file, err)
	return err
}

// Reload reads the running rules' file again (see Load) and applies it as
// Apply does. A file that cannot be read or parsed, or that Apply rejects,
// leaves the running rules in place: the error says why, and is logged
// (WithLogger) and passed to WithOnReload's function. It returns an error
// wrapping ErrNoFile when the running rules come from Parse.
func (s *Set) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.table.Load().cfg.path
	if path == "" {
		return fmt.Errorf("%w: Reload needs rules from Load or Open", ErrNoFile)
	}
	cfg, err := Load(path)
	if err == nil {
		err = s.apply(cfg)
	}
	s.log(path, err)
	if s.set.onReload != nil {
		s.set.onReload(err)
	}
	return err
}

// log reports the outcome of applying the rules of file.
func (s *Set) log(file string, err error) {
	if err != nil {
		s.set.logger.Error("tollgate: rules not applied; the running rules stay", "file", file, "err", err)
		return
	}
	t := s.table.Load()
	s.set.logger.Info("tollgate: rules applied", "file", file, "limiters", len(t.cfg.order), "routes", len(t.routes))
}

// Close releases the fallback store the Set created (see
// WithFallbackStore); it does not close the Set's store. Apply and Reload
// after Close return an error; the middleware keeps serving the last
// rules.
func (s *Set) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.ownFallback != nil {
		err := s.ownFallback.Close()
		s.ownFallback = nil
		return err
	}
	return nil
}

// apply builds cfg's limiters and routes, then swaps them in. s.mu is
// held.
func (s *Set) apply(cfg *Config) error {
	if s.closed {
		return errClosed
	}
	if err := s.checkFrozen(cfg); err != nil {
		return err
	}
	next := make(map[string]*managed, len(cfg.order))
	snaps := make(map[string]*plans, len(cfg.order))
	for _, name := range cfg.order {
		ls := cfg.limiters[name]
		snaps[name] = snapshot(ls)
		m := s.limiters[name]
		if m == nil || m.failure != ls.failure {
			var err error
			if m, err = s.newManaged(ls, snaps[name]); err != nil {
				return fmt.Errorf("rules: limiter %q: %w", name, err)
			}
		}
		next[name] = m
	}
	t, err := s.compile(cfg, next)
	if err != nil {
		return err
	}
	for name, m := range next {
		m.cur.Store(snaps[name])
	}
	s.limiters = next
	s.table.Store(t)
	return nil
}

func (s *Set) newManaged(ls *limiterSpec, p *plans) (*managed, error) {
	m := &managed{failure: ls.failure}
	m.cur.Store(p)
	opts := append([]core.Option(nil), s.set.limOpts...)
	opts = append(opts, core.WithName(ls.name), core.WithLimitsFunc(m.limits))
	if s.set.clock != nil {
		opts = append(opts, core.WithClock(s.set.clock))
	}
	if ls.failure.timeout > 0 {
		opts = append(opts, core.WithTimeout(ls.failure.timeout))
	}
	switch ls.failure.policy {
	case "open":
		opts = append(opts, core.WithFailurePolicy(core.FailOpen))
	case "fallback":
		opts = append(opts, core.WithFailurePolicy(core.Fallback(s.fallbackStore(), core.FleetSize(ls.failure.fleet))))
	default:
		opts = append(opts, core.WithFailurePolicy(core.FailClosed))
	}
	lim, err := core.New(s.store, opts...)
	if err != nil {
		return nil, err
	}
	m.lim = lim
	return m, nil
}

// fallbackStore returns the store of the fallback policy. s.mu is held.
func (s *Set) fallbackStore() core.Store {
	if s.set.fallback != nil {
		return s.set.fallback
	}
	if s.ownFallback == nil {
		s.ownFallback = memstore.New()
	}
	return s.ownFallback
}

// compile builds the routes of cfg over the limiters ms.
func (s *Set) compile(cfg *Config, ms map[string]*managed) (*table, error) {
	t := &table{
		cfg:    cfg,
		mux:    http.NewServeMux(),
		index:  make(map[string]int, len(cfg.routes)),
		byName: make(map[string]int, len(cfg.routes)),
		routes: make([]route, len(cfg.routes)),
	}
	for i, r := range cfg.routes {
		if err := handleWith(t.mux, r.match, routeIndex(i)); err != nil {
			return nil, fmt.Errorf("rules: route %q: %w", r.name, err) // Parse checked it
		}
		t.index[r.match], t.byName[r.name] = i, i
		rt := route{spec: r}
		if len(r.limiters) > 0 {
			rt.lim, rt.opts = s.routeOptions(cfg, r, ms)
			if _, err := guard.New(rt.lim, rt.opts...); err != nil {
				return nil, fmt.Errorf("rules: route %q: %w", r.name, err)
			}
			rt.mw = nethttp.New(rt.lim, rt.opts...)
		}
		t.routes[i] = rt
	}
	return t, nil
}

// routeOptions returns the Limiter and options of a guard for route r:
// its first limiter with its key, the others as further rules.
func (s *Set) routeOptions(cfg *Config, r *routeSpec, ms map[string]*managed) (*core.Limiter, []guard.Option) {
	opts := append([]guard.Option(nil), s.set.guardOpts...)
	opts = append(opts, guard.WithHeaders(cfg.headers), guard.WithCost(r.cost), guard.WithDryRun(r.dryRun))
	var first *core.Limiter
	for j, name := range r.limiters {
		m := ms[name]
		fn, optional := cfg.keyFunc(cfg.limiters[name].key, r)
		fn = m.planKey(fn)
		if optional {
			fn = guard.Optional(fn)
		}
		if j == 0 {
			first = m.lim
			opts = append(opts, guard.WithKey(fn))
		} else {
			opts = append(opts, guard.WithRule(m.lim, fn))
		}
	}
	return first, opts
}

// keyFunc returns the key function named name, for route r, and whether
// it is optional.
func (c *Config) keyFunc(name string, r *routeSpec) (keyfuncs.Func, bool) {
	ks := c.keys[name]
	if ks == nil {
		switch name {
		case "route":
			return keyfuncs.Static(r.name), false
		case "method":
			return keyfuncs.Method(), false
		case "path":
			return keyfuncs.Path(), false
		default: // "ip"
			return keyfuncs.IP(), false
		}
	}
	var fn keyfuncs.Func
	switch ks.kind {
	case "ip":
		fn, _ = keyfuncs.NewIP(ks.ipOpts...) // Parse checked the options
	case "header":
		fn = keyfuncs.Header(ks.arg)
	case "query":
		fn = keyfuncs.Query(ks.arg)
	case "static":
		fn = keyfuncs.Static(ks.arg)
	case "join":
		parts := make([]keyfuncs.Func, len(ks.parts))
		for i, p := range ks.parts {
			f, optional := c.keyFunc(p, r)
			if optional {
				f = guard.Optional(f)
			}
			parts[i] = f
		}
		fn = keyfuncs.Join(ks.sep, parts...)
	}
	return fn, ks.optional
}

// describeKey describes the key function named name for route r, to
// compare two Configs.
func (c *Config) describeKey(name string, r *routeSpec) string {
	ks := c.keys[name]
	if ks == nil {
		if name == "route" {
			return "route " + r.name
		}
		return name
	}
	var d string
	switch ks.kind {
	case "ip":
		d = "ip(" + ks.ipDesc + ")"
	case "join":
		parts := make([]string, len(ks.parts))
		for i, p := range ks.parts {
			parts[i] = c.describeKey(p, r)
		}
		d = fmt.Sprintf("join %q (%s)", ks.sep, strings.Join(parts, ", "))
	default:
		d = fmt.Sprintf("%s %q", ks.kind, ks.arg)
	}
	if ks.optional {
		d += ", optional"
	}
	return d
}
