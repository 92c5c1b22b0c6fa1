package rules

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// A Config is a rules file, parsed and validated: what a Set runs. It is
// immutable and safe for concurrent use.
type Config struct {
	file     string // the name errors give
	path     string // the file Load read; "" after Parse
	headers  guard.HeaderStyle
	keys     map[string]*keySpec
	limiters map[string]*limiterSpec
	order    []string // limiter names, in the file's order
	routes   []*routeSpec
}

// File returns the file's name, as given to Parse or Load.
func (c *Config) File() string { return c.file }

// Limits returns the limits of the named limiter for keys on plan, or, when
// plan is "" or not one of its plans, for keys on no plan; nil when there
// is no such limiter. Unnamed limits carry their derived name
// (core.Limit.PolicyName).
func (c *Config) Limits(limiter, plan string) []core.Limit {
	ls := c.limiters[limiter]
	if ls == nil {
		return nil
	}
	if p, ok := ls.plans[plan]; ok {
		return append([]core.Limit(nil), p...)
	}
	return append([]core.Limit(nil), ls.limits...)
}

// Limiters returns the names of the limiters, in the file's order.
func (c *Config) Limiters() []string { return append([]string(nil), c.order...) }

// Routes returns the names of the routes, in the file's order.
func (c *Config) Routes() []string {
	names := make([]string, len(c.routes))
	for i, r := range c.routes {
		names[i] = r.name
	}
	return names
}

// failureSpec is a failure policy; zero fields are unset.
type failureSpec struct {
	policy  string        // "closed", "open" or "fallback"
	timeout time.Duration // per store call; 0: core.DefaultTimeout
	fleet   int           // fallback: FleetSize
}

// over returns f with the fields o sets.
func (f failureSpec) over(o failureSpec) failureSpec {
	if o.policy != "" {
		f.policy = o.policy
	}
	if o.timeout != 0 {
		f.timeout = o.timeout
	}
	if o.fleet != 0 {
		f.fleet = o.fleet
	}
	return f
}

func (f failureSpec) String() string {
	s := f.policy
	if f.timeout != 0 {
		s += fmt.Sprintf(", timeout %v", f.timeout)
	}
	if f.fleet > 1 {
		s += fmt.Sprintf(", fleet_size %d", f.fleet)
	}
	return s
}

// keySpec is a named key function.
type keySpec struct {
	name     string
	kind     string // "ip", "header", "query", "static" or "join"
	arg      string // header or query name, static value
	ipOpts   []keyfuncs.IPOption
	ipDesc   string // the ip settings, for comparisons
	parts    []string
	partAt   []*yaml.Node
	partPath []string
	sep      string
	optional bool
}

// limiterSpec is a named limiter.
type limiterSpec struct {
	name       string
	key        string
	keyAt      *yaml.Node
	keyPath    string
	limits     []core.Limit
	planHeader string // the plan is this header's value
	planPrefix string // the plan is the key up to this separator
	plans      map[string][]core.Limit
	failure    failureSpec
}

// routeSpec is a route: a pattern and the limiters that apply to it.
type routeSpec struct {
	name     string
	match    string
	at       *yaml.Node // the route's mapping
	path     string
	matchAt  *yaml.Node
	limiters []string
	limAt    []*yaml.Node
	cost     int64
	dryRun   bool
}

// builtinKeys are the key names a file may use without defining them.
var builtinKeys = []string{"ip", "route", "method", "path"}

// planSep separates the plan from the key of a limiter whose plan comes
// from a header: plan names cannot hold it.
const planSep = ":"

// Load reads and parses the rules file at path: YAML, or JSON when its
// name ends in .json. Errors name the file as path. A Set running a
// Config from Load can Reload it.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	c, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	c.path = path
	return c, nil
}

// Parse parses and validates the content of a rules file: JSON when name
// ends in .json (any case), YAML otherwise. name is the file's name, for
// errors. The error joins every problem found, each an *Error that gives
// the line and the field, and matches ErrInvalidRules.
func Parse(name string, data []byte) (*Config, error) {
	root, err := parseTree(name, data, strings.EqualFold(filepath.Ext(name), ".json"))
	if err != nil {
		return nil, err
	}
	d := &decoder{file: name, budget: maxNodes}
	c := d.config(root)
	if err := d.err(); err != nil {
		return nil, err
	}
	c.file = name
	return c, nil
}

var headerStyles = map[string]guard.HeaderStyle{
	"draft-11": guard.HeadersDraft11,
	"draft-06": guard.HeadersDraft06,
	"legacy":   guard.HeadersLegacy,
	"none":     guard.HeadersNone,
}

func (d *decoder) config(root *yaml.Node) *Config {
	c := &Config{keys: map[string]*keySpec{}, limiters: map[string]*limiterSpec{}}
	top := failureSpec{}
	failures := map[string]failureSpec{} // per limiter, as written
	var fleetAt map[string]*yaml.Node = map[string]*yaml.Node{}
	d.fields(root, "",
		field{"version", func(v *yaml.Node, path string) {
			if n, ok := d.integer(v, path, 0, 1<<31); ok && n != 1 {
				d.fail(v, path, "%d is not a version this package reads: 1 is", n)
			}
		}},
		field{"headers", func(v *yaml.Node, path string) {
			if s, ok := d.oneOf(v, path, "draft-11", "draft-06", "legacy", "none"); ok {
				c.headers = headerStyles[s]
			}
		}},
		field{"failure", func(v *yaml.Node, path string) {
			top = d.failure(v, path, fleetAt, "")
		}},
		field{"keys", func(v *yaml.Node, path string) {
			d.mapping(v, path, func(name string, k, v *yaml.Node) {
				if ks := d.key(name, k, v, join(path, name)); ks != nil {
					c.keys[name] = ks
				}
			})
		}},
		field{"limiters", func(v *yaml.Node, path string) {
			d.mapping(v, path, func(name string, k, v *yaml.Node) {
				ls, f := d.limiter(name, k, v, join(path, name), fleetAt)
				if ls != nil {
					c.limiters[name] = ls
					c.order = append(c.order, name)
					failures[name] = f
				}
			})
		}},
		field{"routes", func(v *yaml.Node, path string) {
			d.list(v, path, false, func(i int, e *yaml.Node, path string) {
				if r := d.route(e, path); r != nil {
					c.routes = append(c.routes, r)
				}
			})
		}},
	)
	d.link(c, top, failures, fleetAt)
	return c
}

// failure parses a failure policy. fleetAt records where fleet_size is
// set, under owner ("" for the top level).
func (d *decoder) failure(n *yaml.Node, path string, fleetAt map[string]*yaml.Node, owner string) failureSpec {
	var f failureSpec
	d.fields(n, path,
		field{"policy", func(v *yaml.Node, path string) {
			f.policy, _ = d.oneOf(v, path, "closed", "open", "fallback")
		}},
		field{"timeout", func(v *yaml.Node, path string) {
			f.timeout, _ = d.period(v, path)
		}},
		field{"fleet_size", func(v *yaml.Node, path string) {
			if n, ok := d.integer(v, path, 1, 1<<20); ok {
				f.fleet, fleetAt[owner] = int(n), v
			}
		}},
	)
	return f
}

// period parses a duration in the grammar of core.ParseLimits' periods:
// 100ms, 90s, 1.5h, 1d.
func (d *decoder) period(n *yaml.Node, path string) (time.Duration, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return 0, false
	}
	if strings.ContainsAny(s, ",;|\"") {
		d.fail(n, path, "%q is not a duration (want e.g. 100ms, 90s, 1.5h, 1d)", s)
		return 0, false
	}
	ls, err := core.ParseLimits("1/" + s)
	if err != nil {
		msg := err.Error()
		var pe *core.ParseError
		if errors.As(err, &pe) {
			msg = strings.TrimPrefix(pe.Err.Error(), "period ")
		}
		d.fail(n, path, "%s", msg)
		return 0, false
	}
	if len(ls) != 1 || ls[0] != core.Per(1, ls[0].Period) {
		d.fail(n, path, "%q is not a duration (want e.g. 100ms, 90s, 1.5h, 1d)", s)
		return 0, false
	}
	return ls[0].Period, true
}

// validName reports whether s can name a key, limiter, plan or route.
func validName(s string) bool {
	if s == "" || len(s) > core.MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

const nameRule = "letters, digits, '-', '_' and '.'"

// isToken reports whether s is an HTTP header name (an RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func (d *decoder) key(name string, k, v *yaml.Node, path string) *keySpec {
	if !validName(name) {
		d.fail(k, path, "a key's name is %s", nameRule)
		return nil
	}
	ks := &keySpec{name: name, sep: "|"}
	var sepAt *yaml.Node
	kind := func(kind string, v *yaml.Node, path string) bool {
		if ks.kind != "" {
			d.fail(v, path, "a key is one of ip, header, query, static or join: this one is %s already", ks.kind)
			return false
		}
		ks.kind = kind
		return true
	}
	nonEmpty := func(kindName string, check func(string) bool, want string) func(v *yaml.Node, path string) {
		return func(v *yaml.Node, path string) {
			if !kind(kindName, v, path) {
				return
			}
			if s, ok := d.str(v, path); ok {
				if !check(s) {
					d.fail(v, path, "%q is not %s", s, want)
				}
				ks.arg = s
			}
		}
	}
	anyText := func(s string) bool { return s != "" }
	ok := d.fields(v, path,
		field{"ip", func(v *yaml.Node, path string) {
			if kind("ip", v, path) {
				d.ipKey(ks, v, path)
			}
		}},
		field{"header", nonEmpty("header", isToken, "a header name")},
		field{"query", nonEmpty("query", anyText, "a query parameter name")},
		field{"static", nonEmpty("static", anyText, "a key")},
		field{"join", func(v *yaml.Node, path string) {
			if !kind("join", v, path) {
				return
			}
			errs := len(d.errs)
			d.list(v, path, false, func(i int, e *yaml.Node, path string) {
				if s, ok := d.str(e, path); ok {
					ks.parts = append(ks.parts, s)
					ks.partAt = append(ks.partAt, e)
					ks.partPath = append(ks.partPath, path)
				}
			})
			if len(ks.parts) == 0 && len(d.errs) == errs {
				d.fail(v, path, "want the names of the keys to join")
			}
		}},
		field{"separator", func(v *yaml.Node, path string) {
			if s, ok := d.str(v, path); ok {
				ks.sep, sepAt = s, v
			}
		}},
		field{"optional", func(v *yaml.Node, path string) {
			ks.optional, _ = d.boolean(v, path)
		}},
	)
	switch {
	case !ok:
		return nil
	case ks.kind == "":
		d.fail(k, path, "want one of ip, header, query, static or join")
		return nil
	case sepAt != nil && ks.kind != "join":
		d.fail(sepAt, join(path, "separator"), "a separator belongs to a join, not to %s", ks.kind)
	}
	return ks
}

func (d *decoder) ipKey(ks *keySpec, n *yaml.Node, path string) {
	var desc []string
	ok := d.fields(n, path,
		field{"trusted_proxies", func(v *yaml.Node, path string) {
			d.list(v, path, true, func(i int, e *yaml.Node, path string) {
				s, ok := d.str(e, path)
				if !ok {
					return
				}
				switch strings.ToLower(s) {
				case "loopback":
					ks.ipOpts = append(ks.ipOpts, keyfuncs.TrustLoopback())
				case "private":
					ks.ipOpts = append(ks.ipOpts, keyfuncs.TrustPrivate())
				case "unix":
					ks.ipOpts = append(ks.ipOpts, keyfuncs.TrustUnixSocket())
				default:
					o, err := keyfuncs.TrustProxyCIDRs(s)
					if err != nil {
						d.fail(e, path, "%q is not an address, a CIDR prefix, loopback, private or unix", s)
						return
					}
					ks.ipOpts = append(ks.ipOpts, o)
				}
				desc = append(desc, "trust "+strings.ToLower(s))
			})
		}},
		field{"from", func(v *yaml.Node, path string) {
			s, ok := d.str(v, path)
			switch {
			case !ok:
				return
			case strings.EqualFold(s, "x-forwarded-for"):
				ks.ipOpts = append(ks.ipOpts, keyfuncs.FromXForwardedFor())
			case strings.EqualFold(s, "forwarded"):
				ks.ipOpts = append(ks.ipOpts, keyfuncs.FromForwarded())
			case isToken(s):
				ks.ipOpts = append(ks.ipOpts, keyfuncs.FromHeader(s))
			default:
				d.fail(v, path, "%q is not x-forwarded-for, forwarded or a header name", s)
				return
			}
			desc = append(desc, "from "+http.CanonicalHeaderKey(s))
		}},
		field{"ipv4_prefix", func(v *yaml.Node, path string) {
			if n, ok := d.integer(v, path, 1, 32); ok {
				ks.ipOpts = append(ks.ipOpts, keyfuncs.IPv4Prefix(int(n)))
				desc = append(desc, fmt.Sprintf("v4 /%d", n))
			}
		}},
		field{"ipv6_prefix", func(v *yaml.Node, path string) {
			if n, ok := d.integer(v, path, 1, 128); ok {
				ks.ipOpts = append(ks.ipOpts, keyfuncs.IPv6Prefix(int(n)))
				desc = append(desc, fmt.Sprintf("v6 /%d", n))
			}
		}},
	)
	if !ok {
		return
	}
	if _, err := keyfuncs.NewIP(ks.ipOpts...); err != nil {
		d.failErr(n, path, err)
	}
	ks.ipDesc = strings.Join(desc, ", ")
}

func (d *decoder) limiter(name string, k, v *yaml.Node, path string, fleetAt map[string]*yaml.Node) (*limiterSpec, failureSpec) {
	var f failureSpec
	if !validName(name) {
		d.fail(k, path, "a limiter's name is %s", nameRule)
		return nil, f
	}
	ls := &limiterSpec{name: name, key: "ip"}
	var hasLimits bool
	var planAt, plansAt *yaml.Node
	var plansPath string
	var planNames []string
	var planNameAt []*yaml.Node
	ok := d.fields(v, path,
		field{"key", func(v *yaml.Node, path string) {
			if s, ok := d.str(v, path); ok {
				ls.key, ls.keyAt, ls.keyPath = s, v, path
			}
		}},
		field{"limits", func(v *yaml.Node, path string) {
			hasLimits = true
			ls.limits = d.limits(v, path)
		}},
		field{"plan", func(v *yaml.Node, path string) {
			planAt = v
			errs := len(d.errs)
			d.fields(v, path,
				field{"header", func(v *yaml.Node, path string) {
					if s, ok := d.str(v, path); ok {
						if !isToken(s) {
							d.fail(v, path, "%q is not a header name", s)
						}
						ls.planHeader = s
					}
				}},
				field{"key_prefix", func(v *yaml.Node, path string) {
					if s, ok := d.str(v, path); ok {
						if s == "" {
							d.fail(v, path, "want the separator that ends the plan in a key, e.g. \"_\"")
						}
						ls.planPrefix = s
					}
				}},
			)
			switch {
			case ls.planHeader != "" && ls.planPrefix != "":
				d.fail(v, path, "a plan comes from a header or from a key_prefix, not both")
			case ls.planHeader == "" && ls.planPrefix == "" && len(d.errs) == errs:
				d.fail(v, path, "want header: NAME or key_prefix: SEPARATOR")
			}
		}},
		field{"plans", func(v *yaml.Node, path string) {
			plansAt, plansPath = v, path
			ls.plans = map[string][]core.Limit{}
			d.mapping(v, path, func(plan string, k, v *yaml.Node) {
				if !validName(plan) {
					d.fail(k, join(path, plan), "a plan's name is %s", nameRule)
					return
				}
				ls.plans[plan] = d.limits(v, join(path, plan))
				planNames, planNameAt = append(planNames, plan), append(planNameAt, k)
			})
		}},
		field{"failure", func(v *yaml.Node, path string) {
			f = d.failure(v, path, fleetAt, name)
		}},
	)
	if !ok {
		return nil, f
	}
	if !hasLimits {
		d.fail(k, join(path, "limits"), "missing: a limiter needs its limits, e.g. limits: 100/m")
	}
	switch {
	case plansAt != nil && planAt == nil:
		d.fail(plansAt, plansPath, "plans need a plan: {header: NAME} or {key_prefix: SEPARATOR} to choose one per request")
	case planAt != nil && plansAt == nil:
		d.fail(planAt, join(path, "plan"), "a plan needs plans: the limits of each")
	}
	sep := planSep
	if ls.planPrefix != "" {
		sep = ls.planPrefix
	}
	for i, plan := range planNames {
		if strings.Contains(plan, sep) {
			d.fail(planNameAt[i], join(plansPath, plan), "a plan's name cannot hold the separator %q", sep)
		}
	}
	return ls, f
}

// limits parses a limiter's limits: a string in the grammar of
// core.ParseLimits, or a list of such strings and of structured limits.
// Unnamed limits get their derived name, and names must differ.
func (d *decoder) limits(n *yaml.Node, path string) []core.Limit {
	if n = d.resolve(n); n == nil {
		return nil
	}
	var limits []core.Limit
	switch n.Kind {
	case yaml.ScalarNode:
		limits = d.limitString(n, path)
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			d.fail(n, path, "want at least one limit")
		}
		for i, e := range n.Content {
			p := index(path, i)
			if e = d.resolve(e); e == nil {
				return nil
			}
			if e.Kind == yaml.MappingNode {
				if l, ok := d.structured(e, p); ok {
					limits = append(limits, l)
				}
				continue
			}
			limits = append(limits, d.limitString(e, p)...)
		}
	default:
		d.fail(n, path, "want limits: a string such as \"100/m, 1000/h\", or a list")
		return nil
	}
	seen := map[string]bool{}
	for i := range limits {
		if limits[i].Name == "" {
			limits[i].Name = limits[i].PolicyName()
		}
		if seen[limits[i].Name] {
			d.fail(n, path, "two limits named %q: the RateLimit headers could not tell them apart (name one)", limits[i].Name)
		}
		seen[limits[i].Name] = true
	}
	return limits
}

func (d *decoder) limitString(n *yaml.Node, path string) []core.Limit {
	s, ok := d.str(n, path)
	if !ok {
		return nil
	}
	limits, err := core.ParseLimits(s)
	if err != nil {
		var pe *core.ParseError
		switch {
		case !errors.As(err, &pe):
			d.failErr(n, path, err)
		case pe.Item == strings.TrimSpace(s): // the only item
			d.failErr(n, path, pe.Err)
		default:
			d.fail(n, path, "item %d %q: %w", pe.Index, pe.Item, pe.Err)
		}
		return nil
	}
	return limits
}

// structured parses a limit written as a mapping of its fields.
func (d *decoder) structured(n *yaml.Node, path string) (core.Limit, bool) {
	var l core.Limit
	var hasQuota, hasPeriod bool
	var burstAt, precAt *yaml.Node
	errs := len(d.errs)
	ok := d.fields(n, path,
		field{"quota", func(v *yaml.Node, path string) {
			l.Quota, hasQuota = d.integer(v, path, 1, core.MaxQuota)
		}},
		field{"period", func(v *yaml.Node, path string) {
			l.Period, hasPeriod = d.period(v, path)
		}},
		field{"algorithm", func(v *yaml.Node, path string) {
			if s, ok := d.str(v, path); ok {
				if err := l.Algorithm.UnmarshalText([]byte(s)); err != nil {
					d.fail(v, path, "%q is not an algorithm (want %s)", s, orList(algorithmNames()))
				}
			}
		}},
		field{"burst", func(v *yaml.Node, path string) {
			l.Burst, _ = d.integer(v, path, 1, core.MaxQuota)
			burstAt = v
		}},
		field{"precision", func(v *yaml.Node, path string) {
			l.Precision, _ = d.period(v, path)
			precAt = v
		}},
		field{"name", func(v *yaml.Node, path string) {
			l.Name, _ = d.str(v, path)
		}},
	)
	if !ok {
		return l, false
	}
	if !hasQuota && len(d.errs) == errs {
		d.fail(n, join(path, "quota"), "missing")
	}
	if !hasPeriod && len(d.errs) == errs {
		d.fail(n, join(path, "period"), "missing")
	}
	switch {
	case burstAt != nil && l.Algorithm != core.TokenBucket && l.Algorithm != core.GCRA && l.Algorithm != core.LeakyBucket:
		d.fail(burstAt, join(path, "burst"), "burst applies to token-bucket, gcra and leaky-bucket, not %v", l.Algorithm)
	case precAt != nil && l.Algorithm != core.BucketedWindow:
		d.fail(precAt, join(path, "precision"), "precision applies to bucketed-window, not %v", l.Algorithm)
	}
	if len(d.errs) > errs {
		return l, false
	}
	if err := l.Validate(); err != nil {
		d.failErr(n, path, err)
		return l, false
	}
	return l, true
}

func algorithmNames() []string {
	var names []string
	for _, a := range core.Algorithms() {
		names = append(names, a.String())
	}
	return names
}

func (d *decoder) route(n *yaml.Node, path string) *routeSpec {
	r := &routeSpec{at: n, path: path, cost: 1}
	ok := d.fields(n, path,
		field{"match", func(v *yaml.Node, path string) {
			r.match, _ = d.str(v, path)
			r.matchAt = v
		}},
		field{"name", func(v *yaml.Node, path string) {
			if s, ok := d.str(v, path); ok {
				if len(s) > core.MaxNameLen {
					d.fail(v, path, "a route's name is at most %d bytes", core.MaxNameLen)
				}
				r.name = s
			}
		}},
		field{"limiters", func(v *yaml.Node, path string) {
			d.list(v, path, true, func(i int, e *yaml.Node, path string) {
				if s, ok := d.str(e, path); ok {
					r.limiters, r.limAt = append(r.limiters, s), append(r.limAt, e)
				}
			})
		}},
		field{"cost", func(v *yaml.Node, path string) {
			r.cost, _ = d.integer(v, path, 0, core.MaxQuota)
		}},
		field{"dry_run", func(v *yaml.Node, path string) {
			r.dryRun, _ = d.boolean(v, path)
		}},
	)
	if !ok {
		return nil
	}
	if r.matchAt == nil {
		d.fail(n, join(path, "match"), "missing: a route needs a pattern, e.g. match: \"POST /search\"")
		return nil
	}
	if r.name == "" {
		r.name = r.match
	}
	return r
}

// link checks the names that refer to each other, and resolves each
// limiter's failure policy.
func (d *decoder) link(c *Config, top failureSpec, failures map[string]failureSpec, fleetAt map[string]*yaml.Node) {
	for _, name := range sortedKeys(c.keys) {
		ks := c.keys[name]
		for i, part := range ks.parts {
			switch p := c.keys[part]; {
			case p == nil && !isBuiltin(part):
				d.fail(ks.partAt[i], ks.partPath[i], "no key named %q (define it under keys, or use %s)", part, orList(builtinKeys))
			case p != nil && p.kind == "join":
				d.fail(ks.partAt[i], ks.partPath[i], "%q is a join: join the keys it joins instead", part)
			}
		}
	}
	base := failureSpec{policy: "closed"}.over(top)
	for _, name := range c.order {
		ls := c.limiters[name]
		if c.keys[ls.key] == nil && !isBuiltin(ls.key) {
			d.fail(ls.keyAt, ls.keyPath, "no key named %q (define it under keys, or use %s)", ls.key, orList(builtinKeys))
		}
		ls.failure = base.over(failures[name])
		if ls.failure.policy != "fallback" {
			if at := fleetAt[name]; at != nil {
				d.fail(at, "limiters."+name+".failure.fleet_size", "fleet_size applies to the fallback policy, not %s", ls.failure.policy)
			}
			ls.failure.fleet = 0
		} else if ls.failure.fleet == 0 {
			ls.failure.fleet = 1
		}
	}
	if at := fleetAt[""]; at != nil && base.policy != "fallback" {
		d.fail(at, "failure.fleet_size", "fleet_size applies to the fallback policy, not %s", base.policy)
	}
	d.linkRoutes(c)
}

func (d *decoder) linkRoutes(c *Config) {
	mux := http.NewServeMux()
	names := map[string]*routeSpec{}
	for i, r := range c.routes {
		err := handle(mux, r.match)
		if prev := names[r.name]; prev != nil && err == nil {
			d.fail(r.at, r.path, "a second route named %q (the first is at line %d)", r.name, prev.at.Line)
		}
		names[r.name] = r
		if err != nil {
			if perr := handle(http.NewServeMux(), r.match); perr != nil {
				err = fmt.Errorf("%q is not a pattern of net/http's ServeMux: %w", r.match, perr)
			} else {
				for _, prev := range c.routes[:i] {
					if handle(single(prev.match), r.match) != nil {
						err = fmt.Errorf("pattern %q conflicts with %q (line %d)", r.match, prev.match, prev.matchAt.Line)
						break
					}
				}
			}
			d.failErr(r.matchAt, join(r.path, "match"), err)
		}
		seen := map[string]bool{}
		for j, name := range r.limiters {
			p := index(join(r.path, "limiters"), j)
			if len(r.limAt) == 1 {
				p = join(r.path, "limiters")
			}
			switch {
			case c.limiters[name] == nil:
				d.fail(r.limAt[j], p, "no limiter named %q", name)
			case seen[name]:
				d.fail(r.limAt[j], p, "limiter %q given twice", name)
			}
			seen[name] = true
		}
	}
}

// handle registers pattern on mux, turning its panic on an invalid or
// conflicting pattern into an error.
func handle(mux *http.ServeMux, pattern string) error {
	return handleWith(mux, pattern, http.NotFoundHandler())
}

func handleWith(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// single returns a mux that holds pattern alone, or an empty one when the
// pattern is invalid.
func single(pattern string) *http.ServeMux {
	mux := http.NewServeMux()
	_ = handle(mux, pattern)
	return mux
}

func isBuiltin(name string) bool {
	for _, b := range builtinKeys {
		if b == name {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
