// Package rules configures Tollgate from a rules file, YAML or JSON, and
// reloads it while the program runs without losing the state of the
// limits that did not change.
//
//	set, err := rules.Open(memstore.New(), "rules.yaml")
//	if err != nil {
//		log.Fatal(err) // rules.yaml:14: limiters.api.limits[1]: quota 0 must be at least 1
//	}
//	_ = set.ReloadOn(ctx, syscall.SIGHUP) // and/or set.Watch(ctx, 5*time.Second)
//	http.ListenAndServe(addr, set.Middleware(mux))
//
// # The file
//
//	version: 1                 # optional; 1 is the only version
//	headers: draft-11          # draft-11 (default), draft-06, legacy or none
//	failure:                   # when the store fails (core.FailurePolicy)
//	  policy: fallback         # closed (default), open or fallback
//	  timeout: 100ms           # per store call; default core.DefaultTimeout
//	  fleet_size: 4            # fallback only: each instance decides on 1/4 of each limit
//
//	keys:                      # who is limited: named key functions (package keyfuncs)
//	  ip:                      # redefines the built-in ip: the client behind a proxy
//	    ip:
//	      trusted_proxies: [10.0.0.0/8, loopback]   # CIDRs, addresses, loopback, private, unix (a Unix socket's peer)
//	      from: x-forwarded-for                     # or forwarded, or a header: X-Real-IP
//	      ipv4_prefix: 32
//	      ipv6_prefix: 64
//	  apikey: {header: X-API-Key}
//	  token: {query: token}
//	  everyone: {static: all}
//	  user: {header: X-User, optional: true}        # requests without it skip its limiters
//	  apikey-route: {join: [apikey, route], separator: "|"}
//
//	limiters:
//	  per-ip:
//	    limits: 10/s, 120/m    # core.ParseLimits' grammar; key: ip by default
//	  api:
//	    key: apikey
//	    limits: 100/m gcra burst 20          # keys on no known plan
//	    plan: {header: X-Plan}               # or {key_prefix: "_"}: the key up to "_"
//	    plans:
//	      pro: [1000/m gcra burst 100, {quota: 100000, period: 1d, name: pro-daily}]
//	    failure: {policy: open}              # overrides the top-level fields it sets
//
//	routes:
//	  - match: POST /search    # a net/http ServeMux pattern
//	    name: search           # for Options and the route key; default: match
//	    limiters: [per-ip, api]
//	    cost: 5                # default 1
//	    dry_run: false         # decide and count, never block (guard.WithDryRun)
//	  - match: /               # everything else
//	    limiters: per-ip
//	  - match: GET /healthz
//	    limiters: []           # unlimited
//
// Limits are a string in the grammar of core.ParseLimits, or a list of
// such strings and of structured limits with the fields quota, period,
// algorithm, burst, precision and name. Unnamed limits get their derived
// name (core.Limit.PolicyName), and the names of one limiter's limits must
// differ, for the RateLimit headers. Durations (period, precision,
// timeout) are written as the grammar's periods: 100ms, 90s, 1.5h, 1d.
// In YAML's flow style ({...} and [...]) a comma ends an entry, so quote a
// list of limits there: {limits: "10/s, 100/m"}.
//
// The keys ip (the peer address alone: keyfuncs.IP()), route (the route's
// name: one bucket per route), method and path are built in; a key
// defined under one of those names replaces it. A limiter keeps its state
// per key, in its own scope (its name), so two limiters never share state,
// and a limiter on several routes counts them together unless its key
// holds route.
//
// A plan picks a limiter's limits per request (core.WithLimitsFunc). With
// key_prefix, the plan is the key up to the separator: the API key
// "pro_3f9a" is on plan pro. With header, the plan is the header's value,
// and the limiter's key becomes "plan:key" (":key" on no known plan), so
// each plan counts a client separately. Either way a plan no file names is
// no plan: its keys get the limiter's own limits. The plan comes from the
// request: take it from a header only when a proxy or an earlier
// middleware sets that header, and from a key prefix only for keys an
// earlier middleware verified, or clients choose their plan.
//
// Unknown fields, a field given twice and a name that refers to nothing
// are errors. Every problem of a file is reported at once (up to 20, and
// a count of the rest), each an *Error with the file, the line and the
// field:
//
//	rules.yaml:14: limiters.api.limits[1]: quota 0 must be at least 1
//	rules.yaml:20: routes[2].limiters[0]: no limiter named "serach"
//
// JSON files (a name ending in .json) hold the same fields, and are read
// strictly by encoding/json. YAML is read by go.yaml.in/yaml/v3, the YAML
// organization's maintained continuation of gopkg.in/yaml.v3 (whose
// repository its author archived in 2025): a small, dependency-free
// parser whose node tree gives every value's line. Anchors and aliases
// work; merge keys (<<) do not.
//
// # Reload
//
// Set.Reload reads the file again and swaps in its rules, atomically for
// each limiter's limits and then for the routes; ReloadOn does so on a
// signal, Watch when the file changes (by polling: no dependency, the same
// everywhere). Limiters keep their names, the scope of their keys in the
// store, and read their limits through core.WithLimitsFunc, so a reload
// keeps the usage of every limit whose algorithm, period and precision
// stayed, whatever its quota or burst became. A file that cannot be read
// or parsed, or that cannot run, leaves the running rules in place; the
// error is returned, logged through log/slog (WithLogger) and passed to
// WithOnReload's function.
//
// Everything in the file can change while the program runs behind
// Middleware, which reads the running rules on every request: header
// style, routes, keys, costs and failure policies included. A route handed
// to another adapter by Set.Options is different: that adapter's
// middleware holds the route's limiters (their keys and failure policies
// too), cost, dry run and header style, so a reload that would change
// those is rejected with ErrFrozen; its limits still reload.
package rules
