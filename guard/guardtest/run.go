package guardtest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// Config is what Run hands an adapter's build function for one case.
type Config struct {
	// Limiter is the limiter to pass to the adapter's New, for the case's
	// only middleware: the one Layer, AppWide, of a case that stacks none.
	Limiter *core.Limiter
	// Options are the options to pass to the adapter's New, after
	// translation if the adapter's Option is not guard.Option.
	Options []guard.Option
	// Layers are the middlewares to mount, outermost first: for a case
	// that stacks none, one AppWide layer of Limiter and Options.
	Layers []Layer
	// App is the application handler to put behind the middleware (see
	// App). Every request, whatever its method and path, must reach the
	// AppWide middlewares and then App; requests under GroupPrefix the
	// Grouped ones too, and requests for RoutePath the OnRoute ones too.
	App http.Handler
}

// Paths of the application of a stacked case.
const (
	// GroupPrefix is the prefix of the group of the Grouped layers.
	GroupPrefix = "/api"
	// RoutePath is the route of the OnRoute layers, in the group.
	RoutePath = GroupPrefix + "/search"
	// GroupPath is another route of the group, without OnRoute layers.
	GroupPath = GroupPrefix + "/list"
)

// A Scope is where a Layer's middleware is mounted.
type Scope uint8

const (
	// AppWide middleware runs for every request: gin's r.Use, echo's
	// e.Use, fiber's app.Use, around a net/http mux, chi's r.Use.
	AppWide Scope = iota
	// Grouped middleware runs for the routes of the group GroupPrefix:
	// RoutePath and GroupPath.
	Grouped
	// OnRoute middleware runs for RoutePath only.
	OnRoute
)

// A Layer is one middleware of a case.
type Layer struct {
	Scope   Scope
	Limiter *core.Limiter
	Options []guard.Option
}

// In returns the layers of c mounted at scope, outermost first.
func (c Config) In(scope Scope) []Layer {
	var out []Layer
	for _, l := range c.Layers {
		if l.Scope == scope {
			out = append(out, l)
		}
	}
	return out
}

// A Case is one scenario of the table: a fresh limiter and middleware, and
// requests sent in order.
type Case struct {
	// Name reads as a sentence.
	Name string
	// Limits are the limits of Config.Limiter.
	Limits []core.Limit
	// Store, when set, returns the store of Config.Limiter (and of the
	// rules); default: a memstore on the case's clock.
	Store func() core.Store
	// LimiterOptions are further options of Config.Limiter and of the
	// rules' limiters, e.g. a failure policy.
	LimiterOptions []core.Option
	// Options returns the case's options; rules are built from lims,
	// limiters over the same store and clock as Config.Limiter.
	Options func(lims func(...core.Limit) *core.Limiter) []guard.Option
	// Stack, when set, are the case's middlewares, outermost first,
	// replacing Limits and Options.
	Stack []StackLayer
	// Watch are limiter states whose remaining units Step.Remaining
	// checks after each request.
	Watch []Watch
	// Steps are the requests, in order.
	Steps []Step
}

// A StackLayer is a middleware of a stacked case.
type StackLayer struct {
	Scope  Scope
	Limits []core.Limit
	// Options returns the layer's options, as Case.Options does.
	Options func(lims func(...core.Limit) *core.Limiter) []guard.Option
}

// A Watch is a limiter state: the Limiter of a layer (its index in Stack,
// or 0 for a case without one) and a key.
type Watch struct {
	Layer int
	Key   string
}

// A Step is one request and what its response must be.
type Step struct {
	// Advance moves the case's clock before the request.
	Advance time.Duration
	// Method defaults to GET; Target (path and query) to "/".
	Method, Target string
	// RemoteAddr defaults to "192.0.2.1:1234".
	RemoteAddr string
	// Header holds request headers.
	Header map[string]string
	// Status is the expected status.
	Status int
	// Want holds expected response headers: "" means absent.
	Want map[string]string
	// WantKnown, for adapters whose middlewares all know, before the
	// handler runs, the route that will answer (RunKnownRoutes), replaces
	// the headers of Want it names: an outer middleware that denies lists
	// the policies the middlewares inside it listed on the route.
	WantKnown map[string]string
	// Body is the expected body, exactly.
	Body string
	// Remaining are the units left, after the request, in each state of
	// Case.Watch (core.Limiter.Peek), when set.
	Remaining []int64
}

// A Check is an extra assertion Run applies to every response, e.g. a
// structured-field parse of the rate-limit headers.
type Check func(t *testing.T, c *Case, s *Step, resp *http.Response, body []byte)

// Run runs every case of Cases through the middleware that build returns,
// and checks each response's status, the headers the step names, and the
// body, plus checks. Every adapter runs the same table, so all give the
// same statuses, headers and bodies.
//
// Stacked cases mount several middlewares (see Config.Layers); where an
// adapter's outer middlewares cannot know the route that will answer
// before it runs (fiber's app.Use, net/http middleware around a mux), a
// 429 from them lists their own policies and those of the middlewares
// around them only, which Step.Want expects. Adapters that know the route
// run the table with RunKnownRoutes.
func Run(t *testing.T, build func(t *testing.T, cfg Config) http.Handler, checks ...Check) {
	t.Helper()
	run(t, build, false, nil, checks)
}

// RunLeased is Run with every case's store behind a lease.Store (package
// lease) that holds a slice of at least 4 units per key from its second
// request: the same statuses, headers and bodies, decided in process.
// known is RunKnownRoutes' choice.
func RunLeased(t *testing.T, build func(t *testing.T, cfg Config) http.Handler, known bool, checks ...Check) {
	t.Helper()
	run(t, build, known, func(t *testing.T, st core.Store) core.Store {
		ls, err := lease.New(st, lease.WithMinSlice(4))
		if err != nil {
			t.Fatalf("lease.New: %v", err)
		}
		return ls
	}, checks)
}

// RunKnownRoutes is Run for adapters whose middlewares, app-wide and
// grouped included, know the route that will answer before it runs (gin's
// FullPath, echo's Path): an outer middleware that denies a request lists
// the policies of the middlewares inside it too, as learned on the route
// (Step.WantKnown).
func RunKnownRoutes(t *testing.T, build func(t *testing.T, cfg Config) http.Handler, checks ...Check) {
	t.Helper()
	run(t, build, true, nil, checks)
}

// run runs the table; wrap, when not nil, wraps each case's store.
func run(t *testing.T, build func(t *testing.T, cfg Config) http.Handler, known bool, wrap func(*testing.T, core.Store) core.Store, checks []Check) {
	t.Helper()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			runCase(t, &c, build, known, wrap, checks)
		})
	}
}

func runCase(t *testing.T, c *Case, build func(*testing.T, Config) http.Handler, known bool, wrap func(*testing.T, core.Store) core.Store, checks []Check) {
	t.Helper()
	clock := NewClock(Epoch)
	var st core.Store
	if c.Store != nil {
		st = c.Store()
	} else {
		ms := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
		t.Cleanup(func() { ms.Close() })
		st = ms
	}
	if wrap != nil {
		st = wrap(t, st)
	}
	lims := func(ls ...core.Limit) *core.Limiter {
		opts := append([]core.Option{core.WithClock(clock)}, c.LimiterOptions...)
		for _, l := range ls {
			opts = append(opts, l)
		}
		lim, err := core.New(st, opts...)
		if err != nil {
			t.Fatalf("core.New: %v", err)
		}
		return lim
	}
	cfg := Config{App: App()}
	if c.Stack == nil {
		cfg.Limiter = lims(c.Limits...)
		if c.Options != nil {
			cfg.Options = c.Options(lims)
		}
		cfg.Layers = []Layer{{Scope: AppWide, Limiter: cfg.Limiter, Options: cfg.Options}}
	}
	for _, sl := range c.Stack {
		l := Layer{Scope: sl.Scope, Limiter: lims(sl.Limits...)}
		if sl.Options != nil {
			l.Options = sl.Options(lims)
		}
		cfg.Layers = append(cfg.Layers, l)
	}
	h := build(t, cfg)
	for i := range c.Steps {
		s := &c.Steps[i]
		clock.Advance(s.Advance)
		method, target := s.Method, s.Target
		if method == "" {
			method = http.MethodGet
		}
		if target == "" {
			target = "/"
		}
		req := httptest.NewRequest(method, target, nil)
		req.RemoteAddr = "192.0.2.1:1234"
		if s.RemoteAddr != "" {
			req.RemoteAddr = s.RemoteAddr
		}
		for k, v := range s.Header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		resp := rec.Result()
		body, _ := io.ReadAll(resp.Body)
		where := fmt.Sprintf("step %d (%s %s)", i, method, target)
		if resp.StatusCode != s.Status {
			t.Errorf("%s: status = %d, want %d (body %q)", where, resp.StatusCode, s.Status, body)
		}
		wantHeaders := s.Want
		if known && s.WantKnown != nil {
			wantHeaders = make(map[string]string, len(s.Want)+len(s.WantKnown))
			maps.Copy(wantHeaders, s.Want)
			maps.Copy(wantHeaders, s.WantKnown)
		}
		for k, want := range wantHeaders {
			vals := resp.Header.Values(k)
			switch {
			case want == "" && len(vals) > 0:
				t.Errorf("%s: header %s = %q, want none", where, k, vals)
			case want != "" && (len(vals) != 1 || vals[0] != want):
				t.Errorf("%s: header %s = %q, want %q", where, k, vals, want)
			}
		}
		if string(body) != s.Body {
			t.Errorf("%s: body = %s, want %s", where, body, s.Body)
		}
		if strings.Contains(string(body), "secret") {
			t.Errorf("%s: body leaks an error's text: %s", where, body)
		}
		if s.Remaining != nil {
			for j, w := range c.Watch {
				d, err := cfg.Layers[w.Layer].Limiter.Peek(context.Background(), w.Key)
				switch {
				case err != nil:
					t.Errorf("%s: Peek(layer %d, %q): %v", where, w.Layer, w.Key, err)
				case d.Remaining != s.Remaining[j]:
					t.Errorf("%s: Peek(layer %d, %q).Remaining = %d, want %d", where, w.Layer, w.Key, d.Remaining, s.Remaining[j])
				}
			}
		}
		for _, check := range checks {
			check(t, c, s, resp, body)
		}
	}
}

// Problem429 returns the expected body of a 429: the problem details with
// a Retry-After of retry seconds and the violated policies.
func Problem429(retry int, policies ...string) string {
	detail := fmt.Sprintf("Retry after %d seconds.", retry)
	if retry == 1 {
		detail = "Retry after 1 second."
	}
	return `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,` +
		`"detail":"` + detail + `","violated-policies":[` + quoteAll(policies) + `]}`
}

// ProblemCapacity returns the expected body of a 429 for a cost above a
// limit's capacity, counted in unit ("units" when the limit has none).
func ProblemCapacity(cost, capacity int64, unit string, policies ...string) string {
	if unit == "" {
		unit = "units"
	}
	return `{"type":"https://github.com/tollgate/tollgate/blob/main/docs/problems.md#request-exceeds-capacity","title":"Request Exceeds Capacity","status":429,` +
		fmt.Sprintf(`"detail":"The request costs %d %s; the policy admits at most %d in one request, so it can never pass.","cost":%d,"capacity":%d,`, cost, unit, capacity, cost, capacity) +
		`"violated-policies":[` + quoteAll(policies) + `]}`
}

func quoteAll(ss []string) string {
	quoted := make([]string, len(ss))
	for i, p := range ss {
		quoted[i] = `"` + p + `"`
	}
	return strings.Join(quoted, ",")
}

// ProblemStatus returns the expected body of an error response.
func ProblemStatus(status int) string {
	return fmt.Sprintf(`{"type":"about:blank","title":%q,"status":%d}`, http.StatusText(status), status)
}

// ProblemDetail returns the expected body of an error response with a
// detail (see guard.ErrorDetail).
func ProblemDetail(status int, detail string) string {
	return fmt.Sprintf(`{"type":"about:blank","title":%q,"status":%d,"detail":%q}`, http.StatusText(status), status, detail)
}

// header builds a Want map from pairs.
func header(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// keyHeader is a key function over the X-Client header, so that the table
// does not depend on how a framework reports the peer address.
func keyHeader() keyfuncs.Func { return keyfuncs.Header("X-Client") }

func fixed(n int64, d time.Duration, name string) core.Limit {
	return core.Per(n, d).WithAlgorithm(core.FixedWindow).Named(name)
}
