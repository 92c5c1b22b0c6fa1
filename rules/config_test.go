package rules_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/rules"
)

// problems returns the *rules.Errors that err joins, as text.
func problems(t *testing.T, err error) []string {
	t.Helper()
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok && !isRulesError(err) {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	var out []string
	for _, e := range list {
		var re *rules.Error
		if !errors.As(e, &re) {
			t.Fatalf("problem %v (%T) is not a *rules.Error", e, e)
		}
		if !errors.Is(e, rules.ErrInvalidRules) {
			t.Errorf("problem %v does not match ErrInvalidRules", e)
		}
		out = append(out, re.Error())
	}
	return out
}

func isRulesError(err error) bool {
	_, ok := err.(*rules.Error)
	return ok
}

func TestParseReadsEveryField(t *testing.T) {
	for _, file := range []string{"testdata/full.yaml", "testdata/full.json"} {
		t.Run(file, func(t *testing.T) {
			cfg, err := rules.Load(file)
			if err != nil {
				t.Fatalf("Load(%q) = %v", file, err)
			}
			if got, want := cfg.Limiters(), []string{"per-ip", "api", "search", "users"}; !reflect.DeepEqual(got, want) {
				t.Errorf("Limiters() = %q, want %q", got, want)
			}
			if got, want := cfg.Routes(), []string{"/", "search", "/api/", "GET /healthz"}; !reflect.DeepEqual(got, want) {
				t.Errorf("Routes() = %q, want %q", got, want)
			}
			limits := []struct {
				limiter, plan string
				want          []core.Limit
			}{
				{"per-ip", "", []core.Limit{core.PerSecond(10).Named("10-per-1s"), core.PerMinute(120).Named("120-per-1m")}},
				{"api", "", []core.Limit{core.PerMinute(100).WithAlgorithm(core.GCRA).WithBurst(20).Named("100-per-1m")}},
				{"api", "pro", []core.Limit{core.PerMinute(1000).WithAlgorithm(core.GCRA).WithBurst(100).Named("1000-per-1m"), core.PerDay(100000).Named("pro-daily")}},
				{"api", "enterprise", []core.Limit{core.PerMinute(100).WithAlgorithm(core.GCRA).WithBurst(20).Named("100-per-1m")}},
				{"search", "", []core.Limit{core.PerMinute(20).WithAlgorithm(core.SlidingLog).Named("20-per-1m")}},
				{"nope", "", nil},
			}
			for _, l := range limits {
				if got := cfg.Limits(l.limiter, l.plan); !reflect.DeepEqual(got, l.want) {
					t.Errorf("Limits(%q, %q) = %v, want %v", l.limiter, l.plan, got, l.want)
				}
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name string
		file string
		src  string
		want []string // every problem, in order
	}{
		{"a limit of quota 0 in a list", "rules.yaml",
			"limiters:\n  api:\n    limits:\n      - 100/m\n      - 0/s\n",
			[]string{"rules.yaml:5: limiters.api.limits[1]: quota 0 must be at least 1"}},
		{"a limit of quota 0 in a string of two", "rules.yaml",
			"limiters:\n  api:\n    limits: 100/m, 0/s\n",
			[]string{`rules.yaml:3: limiters.api.limits: item 1 "0/s": quota 0 must be at least 1`}},
		{"a structured limit of quota 0", "rules.yaml",
			"limiters:\n  api:\n    limits:\n      - {quota: 0, period: 1m}\n",
			[]string{"rules.yaml:4: limiters.api.limits[0].quota: 0 must be at least 1"}},
		{"a structured limit without a period", "rules.yaml",
			"limiters:\n  api:\n    limits:\n      - quota: 5\n",
			[]string{"rules.yaml:4: limiters.api.limits[0].period: missing"}},
		{"a structured limit that Validate rejects", "rules.yaml",
			"limiters:\n  api:\n    limits:\n      - quota: 5\n        period: 1m\n        algorithm: bucketed-window\n        precision: 7s\n",
			[]string{"rules.yaml:4: limiters.api.limits[0]: tollgate: invalid limit {Quota: 5, Period: 1m0s}: precision 7s does not divide period 1m0s into whole microsecond buckets"}},
		{"a burst on a sliding window", "rules.yaml",
			"limiters:\n  e:\n    limits: [1/s, {quota: 1, period: 1s, burst: 3}]\n",
			[]string{"rules.yaml:3: limiters.e.limits[1].burst: burst applies to token-bucket, gcra and leaky-bucket, not sliding-window"}},
		{"an unknown algorithm", "rules.yaml",
			"limiters:\n  e:\n    limits: [{quota: 1, period: 1s, algorithm: quick}]\n",
			[]string{`rules.yaml:3: limiters.e.limits[0].algorithm: "quick" is not an algorithm (want sliding-window, fixed-window, sliding-log, bucketed-window, token-bucket, gcra, leaky-bucket or concurrency)`}},
		{"two limits of one name", "rules.yaml",
			"limiters:\n  d:\n    limits: 1/s name a, 2/m name a\n",
			[]string{`rules.yaml:3: limiters.d.limits: two limits named "a": the RateLimit headers could not tell them apart (name one)`}},
		{"a misspelt field and no limits", "rules.yaml",
			"limiters:\n  api:\n    limit: 100/m\n",
			[]string{
				"rules.yaml:2: limiters.api.limits: missing: a limiter needs its limits, e.g. limits: 100/m",
				"rules.yaml:3: limiters.api.limit: unknown field (want key, limits, plan, plans or failure)",
			}},
		{"an unknown top-level field", "rules.yaml",
			"limits: 100/m\n",
			[]string{"rules.yaml:1: limits: unknown field (want version, headers, failure, keys, limiters or routes)"}},
		{"a field given twice", "rules.yaml",
			"headers: legacy\nheaders: none\n",
			[]string{"rules.yaml:2: headers: given twice"}},
		{"names that refer to nothing", "rules.yaml",
			"limiters:\n  api:\n    limits: 100/m\n    key: nokey\nroutes:\n  - match: /\n    limiters: [api, other]\n  - match: /x\n    limiters: api\n",
			[]string{
				`rules.yaml:4: limiters.api.key: no key named "nokey" (define it under keys, or use ip, route, method or path)`,
				`rules.yaml:7: routes[0].limiters[1]: no limiter named "other"`,
			}},
		{"a limiter twice on a route", "rules.yaml",
			"limiters:\n  api: {limits: 1/s}\nroutes:\n  - match: /\n    limiters: [api, api]\n",
			[]string{`rules.yaml:5: routes[0].limiters[1]: limiter "api" given twice`}},
		{"patterns that conflict or do not parse", "rules.yaml",
			"routes:\n  - match: GET /a/{x}\n  - match: GET /{y}/b\n  - match: /a\n  - match: /a\n  - match: /{bad\n",
			[]string{
				`rules.yaml:3: routes[1].match: pattern "GET /{y}/b" conflicts with "GET /a/{x}" (line 2)`,
				`rules.yaml:5: routes[3].match: pattern "/a" conflicts with "/a" (line 4)`,
				`rules.yaml:6: routes[4].match: "/{bad" is not a pattern of net/http's ServeMux: parsing "/{bad": at offset 1: bad wildcard segment (must end with '}')`,
			}},
		{"two routes of one name", "rules.yaml",
			"routes:\n  - {match: /a, name: r}\n  - {match: /b, name: r}\n",
			[]string{`rules.yaml:3: routes[1]: a second route named "r" (the first is at line 2)`}},
		{"a route without a match", "rules.yaml",
			"routes:\n  - limiters: []\n",
			[]string{`rules.yaml:2: routes[0].match: missing: a route needs a pattern, e.g. match: "POST /search"`}},
		{"a negative cost", "rules.yaml",
			"routes:\n  - {match: /, cost: -1}\n",
			[]string{"rules.yaml:2: routes[0].cost: -1 must be at least 0"}},
		{"bad top-level settings", "rules.yaml",
			"version: 2\nheaders: draft-12\nfailure: {policy: maybe, timeout: 0s, fleet_size: 3}\n",
			[]string{
				"rules.yaml:1: version: 2 is not a version this package reads: 1 is",
				`rules.yaml:2: headers: "draft-12" is not draft-11, draft-06, legacy or none`,
				`rules.yaml:3: failure.policy: "maybe" is not closed, open or fallback`,
				"rules.yaml:3: failure.timeout: 0s must be positive",
				"rules.yaml:3: failure.fleet_size: fleet_size applies to the fallback policy, not closed",
			}},
		{"a limiter's fleet size without fallback", "rules.yaml",
			"failure: {policy: fallback}\nlimiters:\n  a:\n    limits: 1/s\n    failure:\n      policy: open\n      fleet_size: 2\n",
			[]string{"rules.yaml:7: limiters.a.failure.fleet_size: fleet_size applies to the fallback policy, not open"}},
		{"bad keys", "rules.yaml",
			"keys:\n  k: {header: X, query: q}\n  j: {join: [k, nope]}\n  j2: {join: [j]}\n  bad name: {static: x}\n  s: {static: x, separator: ':'}\n  i: {ip: {trusted_proxies: [nope], ipv4_prefix: 40, from: 'a b'}}\n  h: {header: 'X Y'}\n  e: {}\n",
			[]string{
				"rules.yaml:2: keys.k.query: a key is one of ip, header, query, static or join: this one is header already",
				`rules.yaml:3: keys.j.join[1]: no key named "nope" (define it under keys, or use ip, route, method or path)`,
				`rules.yaml:4: keys.j2.join[0]: "j" is a join: join the keys it joins instead`,
				"rules.yaml:5: keys.bad name: a key's name is letters, digits, '-', '_' and '.'",
				"rules.yaml:6: keys.s.separator: a separator belongs to a join, not to static",
				`rules.yaml:7: keys.i.ip.trusted_proxies[0]: "nope" is not an address, a CIDR prefix, loopback, private or unix`,
				"rules.yaml:7: keys.i.ip.ipv4_prefix: 40 must be at most 32",
				`rules.yaml:7: keys.i.ip.from: "a b" is not x-forwarded-for, forwarded or a header name`,
				`rules.yaml:8: keys.h.header: "X Y" is not a header name`,
				"rules.yaml:9: keys.e: want one of ip, header, query, static or join",
			}},
		{"bad plans", "rules.yaml",
			"limiters:\n  a:\n    limits: 1/s\n    plans: {pro: 2/s}\n  b:\n    limits: 1/s\n    plan: {header: X-Plan}\n  c:\n    limits: 1/s\n    plan: {key_prefix: _}\n    plans: {pro_x: 2/s}\n  d:\n    limits: 1/s\n    plan: {header: X-Plan, key_prefix: _}\n    plans: {pro: 2/s}\n",
			[]string{
				"rules.yaml:4: limiters.a.plans: plans need a plan: {header: NAME} or {key_prefix: SEPARATOR} to choose one per request",
				"rules.yaml:7: limiters.b.plan: a plan needs plans: the limits of each",
				`rules.yaml:11: limiters.c.plans.pro_x: a plan's name cannot hold the separator "_"`,
				"rules.yaml:14: limiters.d.plan: a plan comes from a header or from a key_prefix, not both",
			}},
		{"an empty join and an empty plan after another problem", "rules.yaml",
			"headers: nope\nkeys:\n  j: {join: []}\nlimiters:\n  a: {limits: 1/s, plan: {}, plans: {pro: 2/s}}\n",
			[]string{
				`rules.yaml:1: headers: "nope" is not draft-11, draft-06, legacy or none`,
				"rules.yaml:3: keys.j.join: want the names of the keys to join",
				"rules.yaml:5: limiters.a.plan: want header: NAME or key_prefix: SEPARATOR",
			}},
		{"a value of the wrong kind", "rules.yaml",
			"limiters: [a, b]\nroutes: {match: /}\n",
			[]string{"rules.yaml:1: limiters: want a mapping, not a list", "rules.yaml:2: routes: want a list, not a mapping"}},
		{"a merge key", "rules.yaml",
			"limiters:\n  a: &a {limits: 1/s}\n  b:\n    <<: *a\n",
			[]string{
				"rules.yaml:3: limiters.b.limits: missing: a limiter needs its limits, e.g. limits: 100/m",
				"rules.yaml:4: limiters.b: merge keys (<<) are not supported",
			}},
		{"a YAML syntax error", "rules.yaml", "limiters:\n  a: [\n", []string{"rules.yaml:2: did not find expected node content"}},
		{"an empty file", "rules.yaml", "# nothing\n", []string{"rules.yaml: no rules: the file is empty"}},
		{"two YAML documents", "rules.yaml", "---\nlimiters: {}\n---\nx: 1\n", []string{"rules.yaml:3: a second YAML document: a rules file holds one"}},
		{"a JSON limit of quota 0", "rules.json",
			"{\n  \"limiters\": {\n    \"api\": {\"limits\": \"0/s\"}\n  }\n}\n",
			[]string{"rules.json:3: limiters.api.limits: quota 0 must be at least 1"}},
		{"a JSON trailing comma", "rules.json",
			"{\n  \"limiters\": {\n    \"api\": {\"limits\": \"1/s\",}\n  }\n}\n",
			[]string{"rules.json:3: JSON: invalid character '}' looking for beginning of object key string"}},
		{"a JSON fraction for a whole number, indented with tabs", "RULES.JSON",
			"{\n\t\"limiters\": {\n\t\t\"api\": {\"limits\": [\"1/s\", {\"quota\": 5.5, \"period\": \"1m\"}]}\n\t}\n}\n",
			[]string{"RULES.JSON:3: limiters.api.limits[1].quota: want a whole number, not 5.5"}},
		{"JSON after the top-level value", "rules.json", "{}\n{}\n", []string{"rules.json:2: JSON: data after the top-level value"}},
		{"a JSON file cut short", "rules.json", "{\"limiters\": {\n", []string{"rules.json:2: JSON: unexpected end of file"}},
		{"an empty JSON file", "rules.json", " \n", []string{"rules.json: no rules: the file is empty"}},
		{"a JSON key given twice", "rules.json", "{\"headers\": \"none\",\n \"headers\": \"none\"}", []string{"rules.json:2: headers: given twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := rules.Parse(tt.file, []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want errors %q", tt.src, cfg, tt.want)
			}
			if got := problems(t, err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q) problems:\n%s\nwant:\n%s", tt.src, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestParseErrorsOfLimitsMatchErrInvalidLimit(t *testing.T) {
	_, err := rules.Parse("rules.yaml", []byte("limiters:\n  api: {limits: 0/s}\n"))
	if !errors.Is(err, core.ErrInvalidLimit) || !errors.Is(err, rules.ErrInvalidRules) {
		t.Errorf("Parse = %v, want an error matching core.ErrInvalidLimit and ErrInvalidRules", err)
	}
	var re *rules.Error
	if !errors.As(err, &re) || re.File != "rules.yaml" || re.Line != 2 || re.Field != "limiters.api.limits" {
		t.Errorf("Parse = %#v, want an *Error at rules.yaml:2, field limiters.api.limits", re)
	}
}

func TestParseFollowsAliases(t *testing.T) {
	cfg, err := rules.Parse("rules.yaml", []byte("limiters:\n  a: {limits: &l 5/m}\n  b: {limits: *l}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Limits("b", ""); len(got) != 1 || got[0].Quota != 5 || got[0].Period != time.Minute {
		t.Errorf("Limits(b) = %v, want 5/m, as a's", got)
	}
}

func TestParseBoundsAnAliasBomb(t *testing.T) {
	// Each level lists the previous one ten times: 10^9 values, expanded.
	src := "x: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, l := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		src += "x" + l + ": &" + l + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = l
	}
	src += "limiters:\n  a: {limits: *i}\n"
	_, err := rules.Parse("bomb.yaml", []byte(src))
	if err == nil {
		t.Fatal("Parse(an alias bomb) = nil, want errors")
	}
	n := 0
	for _, p := range problems(t, err) {
		if strings.Contains(p, "limiters.a.limits[") {
			n++
		}
	}
	if n != 10 {
		t.Errorf("Parse(an alias bomb) = %v, want a problem for each of the 10 lists in the limits", err)
	}
}

func TestParseListsTwentyProblemsAndCountsTheRest(t *testing.T) {
	src := ""
	for i := range 25 {
		src += "unknown" + strings.Repeat("x", i) + ": 1\n"
	}
	_, err := rules.Parse("rules.yaml", []byte(src))
	got := problems(t, err)
	if len(got) != 21 || got[20] != "rules.yaml: 5 more problems" || !strings.HasPrefix(got[19], "rules.yaml:20: ") {
		t.Errorf("Parse(25 unknown fields) = %d problems, the last two %q; want 20 and a count of the rest", len(got), got[len(got)-2:])
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("limiters:\n  api: {limits: 0/s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := rules.Load(path)
	if want := path + ":2: limiters.api.limits: quota 0 must be at least 1"; err == nil || err.Error() != want {
		t.Errorf("Load = %v, want %q", err, want)
	}
	if _, err := rules.Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(a missing file) = %v, want an error matching os.ErrNotExist", err)
	}
}
