package guardtest

import (
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// ipA is the key of clientA, the default client.
const ipA = "192.0.2.1"

// stacked returns the cases of several middlewares on one request: they
// act as one decision (see guard.Chain).
func stacked() []Case {
	const (
		appP    = `"app";q=3;w=60`
		apiP    = `"api";q=10;w=60`
		searchP = `"search";q=2;w=60`
		all3    = appP + ", " + apiP + ", " + searchP
	)
	alike := func(n int64) core.Limit { return core.Per(n, minute).WithAlgorithm(core.FixedWindow) } // named "n-per-1m"
	return []Case{
		{
			Name: "app-wide, group and route middlewares act as one decision: a denial by any leaves no charge in the others",
			Stack: []StackLayer{
				{Scope: AppWide, Limits: []core.Limit{fixed(3, minute, "app")}},
				{Scope: Grouped, Limits: []core.Limit{fixed(10, minute, "api")}},
				{Scope: OnRoute, Limits: []core.Limit{fixed(2, minute, "search")}},
			},
			Watch: []Watch{{0, ipA}, {1, ipA}, {2, ipA}},
			Steps: []Step{
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{2, 9, 1},
					Want: header(hPolicy, all3, hLimit, `"app";r=2;t=60, "api";r=9;t=60, "search";r=1;t=60`)},
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{1, 8, 0},
					Want: header(hPolicy, all3, hLimit, `"app";r=1;t=60, "api";r=8;t=60, "search";r=0;t=60`)},
				// The route denies: the app-wide and group limits give
				// the request's unit back, and say so.
				{Target: RoutePath, Status: 429, Body: Problem429(60, "search"), Remaining: []int64{1, 8, 0},
					Want: header(hPolicy, all3, hLimit, `"app";r=1;t=60, "api";r=8;t=60, "search";r=0;t=60`, hRetry, "60")},
				{Target: GroupPath, Status: 200, Body: "ok", Remaining: []int64{0, 7, 0},
					Want: header(hPolicy, appP+", "+apiP, hLimit, `"app";r=0;t=60, "api";r=7;t=60`)},
				// The app-wide middleware denies before the others run.
				// Where it knows the route, it lists the policies they
				// listed on it.
				{Target: GroupPath, Status: 429, Body: Problem429(60, "app"), Remaining: []int64{0, 7, 0},
					Want:      header(hPolicy, appP, hLimit, `"app";r=0;t=60`, hRetry, "60"),
					WantKnown: header(hPolicy, appP+", "+apiP)},
				{Target: RoutePath, Status: 429, Body: Problem429(60, "app"), Remaining: []int64{0, 7, 0},
					Want:      header(hPolicy, appP, hLimit, `"app";r=0;t=60`, hRetry, "60"),
					WantKnown: header(hPolicy, all3)},
				{Status: 429, Body: Problem429(60, "app"), Remaining: []int64{0, 7, 0}, Want: header(hPolicy, appP, hLimit, `"app";r=0;t=60`)},
				{RemoteAddr: clientB, Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{0, 7, 0},
					Want: header(hPolicy, all3, hLimit, `"app";r=2;t=60, "api";r=9;t=60, "search";r=1;t=60`)},
				{Advance: minute, Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{2, 9, 1},
					Want: header(hPolicy, all3, hLimit, `"app";r=2;t=60, "api";r=9;t=60, "search";r=1;t=60`)},
			},
		},
		{
			Name: "limiters configured alike and stacked share a state, which counts a request once and is listed once",
			Stack: []StackLayer{
				{Scope: AppWide, Limits: []core.Limit{alike(5)}},
				{Scope: OnRoute, Limits: []core.Limit{alike(5)}},
			},
			Watch: []Watch{{0, ipA}, {1, ipA}},
			Steps: []Step{
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{4, 4},
					Want: header(hPolicy, `"5-per-1m";q=5;w=60`, hLimit, `"5-per-1m";r=4;t=60`)},
				{Status: 200, Body: "ok", Remaining: []int64{3, 3}, Want: header(hLimit, `"5-per-1m";r=3;t=60`)},
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{2, 2}, Want: header(hLimit, `"5-per-1m";r=2;t=60`)},
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{1, 1}},
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{0, 0}, Want: header(hLimit, `"5-per-1m";r=0;t=60`)},
				{Target: RoutePath, Status: 429, Body: Problem429(60, "5-per-1m"), Remaining: []int64{0, 0},
					Want: header(hPolicy, `"5-per-1m";q=5;w=60`, hLimit, `"5-per-1m";r=0;t=60`, hRetry, "60")},
			},
		},
		{
			Name: "alike limiters stacked with different costs charge the largest once, and a denial of the rest refunds all",
			Stack: []StackLayer{
				{Scope: AppWide, Limits: []core.Limit{alike(10)}},
				{Scope: OnRoute, Limits: []core.Limit{alike(10)}, Options: opts(guard.WithCost(3))},
			},
			Watch: []Watch{{0, ipA}},
			Steps: []Step{
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{7}, Want: header(hLimit, `"10-per-1m";r=7;t=60`)},
				{Status: 200, Body: "ok", Remaining: []int64{6}},
				{Status: 200, Body: "ok", Remaining: []int64{5}},
				{Status: 200, Body: "ok", Remaining: []int64{4}},
				{Status: 200, Body: "ok", Remaining: []int64{3}},
				{Status: 200, Body: "ok", Remaining: []int64{2}},
				// The app-wide middleware takes 1 of the 2 left, the
				// route asks 2 more: denied, and the 1 is given back.
				{Target: RoutePath, Status: 429, Body: Problem429(60, "10-per-1m"), Remaining: []int64{2},
					Want: header(hPolicy, `"10-per-1m";q=10;w=60`, hLimit, `"10-per-1m";r=2;t=60`, hRetry, "60")},
				{Status: 200, Body: "ok", Remaining: []int64{1}},
			},
		},
		{
			Name: "two rules of one limiter state on one key count a request once",
			Stack: []StackLayer{{Scope: AppWide, Limits: []core.Limit{fixed(2, minute, "per-ip")},
				Options: func(lims func(...core.Limit) *core.Limiter) []guard.Option {
					return []guard.Option{guard.WithRule(lims(fixed(2, minute, "per-ip")), keyfuncs.IP())}
				}}},
			Watch: []Watch{{0, ipA}},
			Steps: []Step{
				{Status: 200, Body: "ok", Remaining: []int64{1}, Want: header(hPolicy, `"per-ip";q=2;w=60`, hLimit, `"per-ip";r=1;t=60`)},
				{Status: 200, Body: "ok", Remaining: []int64{0}, Want: header(hLimit, `"per-ip";r=0;t=60`)},
				{Status: 429, Body: Problem429(60, "per-ip"), Remaining: []int64{0}, Want: header(hPolicy, `"per-ip";q=2;w=60`, hLimit, `"per-ip";r=0;t=60`)},
			},
		},
		{
			Name: "policies of distinct states that share a name are told apart by a suffix, in the headers and the body alike",
			Stack: []StackLayer{
				{Scope: AppWide, Limits: []core.Limit{alike(10)}, Options: func(lims func(...core.Limit) *core.Limiter) []guard.Option {
					return []guard.Option{guard.WithRule(lims(alike(10)), keyfuncs.Header("X-User"))} // same scope, another key
				}},
				{Scope: OnRoute, Limits: []core.Limit{fixed(1, minute, "10-per-1m")}}, // another limit of the same name
			},
			Watch: []Watch{{0, ipA}, {0, "alice"}, {1, ipA}},
			Steps: []Step{
				{Header: map[string]string{"X-User": "alice"}, Status: 200, Body: "ok", Remaining: []int64{9, 9, 1},
					Want: header(hPolicy, `"10-per-1m";q=10;w=60, "10-per-1m-2";q=10;w=60`, hLimit, `"10-per-1m";r=9;t=60, "10-per-1m-2";r=9;t=60`)},
				{Target: RoutePath, Header: map[string]string{"X-User": "alice"}, Status: 200, Body: "ok", Remaining: []int64{8, 8, 0},
					Want: header(hPolicy, `"10-per-1m";q=10;w=60, "10-per-1m-2";q=10;w=60, "10-per-1m-3";q=1;w=60`,
						hLimit, `"10-per-1m";r=8;t=60, "10-per-1m-2";r=8;t=60, "10-per-1m-3";r=0;t=60`)},
				{Target: RoutePath, Header: map[string]string{"X-User": "alice"}, Status: 429, Body: Problem429(60, "10-per-1m-3"), Remaining: []int64{8, 8, 0},
					Want: header(hPolicy, `"10-per-1m";q=10;w=60, "10-per-1m-2";q=10;w=60, "10-per-1m-3";q=1;w=60`,
						hLimit, `"10-per-1m";r=8;t=60, "10-per-1m-2";r=8;t=60, "10-per-1m-3";r=0;t=60`)},
			},
		},
		{
			Name: "draft-06 headers of stacked middlewares report the most restrictive remaining, not the last writer's",
			Stack: []StackLayer{
				{Scope: AppWide, Limits: []core.Limit{fixed(3, minute, "app")}, Options: opts(guard.WithHeaders(guard.HeadersDraft06))},
				{Scope: OnRoute, Limits: []core.Limit{fixed(50, minute, "search")}, Options: opts(guard.WithHeaders(guard.HeadersDraft06))},
			},
			Watch: []Watch{{0, ipA}, {1, ipA}},
			Steps: []Step{
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{2, 49},
					Want: header(hPolicy, "3;w=60, 50;w=60", "RateLimit-Limit", "3", "RateLimit-Remaining", "2", "RateLimit-Reset", "60", hLimit, notFound)},
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{1, 48}, Want: header("RateLimit-Limit", "3", "RateLimit-Remaining", "1")},
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{0, 47}, Want: header("RateLimit-Limit", "3", "RateLimit-Remaining", "0")},
				{Target: RoutePath, Status: 429, Body: Problem429(60, "app"), Remaining: []int64{0, 47},
					Want:      header(hPolicy, "3;w=60", "RateLimit-Limit", "3", "RateLimit-Remaining", "0", "RateLimit-Reset", "60", hRetry, "60"),
					WantKnown: header(hPolicy, "3;w=60, 50;w=60")},
			},
		},
		{
			Name: "legacy headers of stacked middlewares report the most restrictive remaining, and a route's denial refunds the app-wide limit",
			Stack: []StackLayer{
				{Scope: AppWide, Limits: []core.Limit{fixed(50, minute, "app")}, Options: opts(guard.WithHeaders(guard.HeadersLegacy))},
				{Scope: OnRoute, Limits: []core.Limit{fixed(2, minute, "search")}, Options: opts(guard.WithHeaders(guard.HeadersLegacy))},
			},
			Watch: []Watch{{0, ipA}, {1, ipA}},
			Steps: []Step{
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{49, 1},
					Want: header("X-RateLimit-Limit", "2", "X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "60", hPolicy, notFound)},
				{Status: 200, Body: "ok", Remaining: []int64{48, 1}, Want: header("X-RateLimit-Limit", "50", "X-RateLimit-Remaining", "48")},
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{47, 0}, Want: header("X-RateLimit-Limit", "2", "X-RateLimit-Remaining", "0")},
				{Target: RoutePath, Status: 429, Body: Problem429(60, "search"), Remaining: []int64{47, 0},
					Want: header("X-RateLimit-Limit", "2", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60", hRetry, "60")},
			},
		},
		{
			Name: "without rate-limit headers stacked middlewares still refund each other, and a 429 carries Retry-After alone",
			Stack: []StackLayer{
				{Scope: AppWide, Limits: []core.Limit{fixed(5, minute, "app")}, Options: opts(guard.WithHeaders(guard.HeadersNone))},
				{Scope: OnRoute, Limits: []core.Limit{fixed(1, minute, "search")}, Options: opts(guard.WithHeaders(guard.HeadersNone))},
			},
			Watch: []Watch{{0, ipA}, {1, ipA}},
			Steps: []Step{
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{4, 0}, Want: header(hPolicy, notFound, hLimit, notFound)},
				{Target: RoutePath, Status: 429, Body: Problem429(60, "search"), Remaining: []int64{4, 0},
					Want: header(hPolicy, notFound, hLimit, notFound, hRetry, "60")},
			},
		},
		{
			Name: "a route's middleware in dry run lets its denial pass, and the app-wide limit keeps its charge",
			Stack: []StackLayer{
				{Scope: AppWide, Limits: []core.Limit{fixed(5, minute, "app")}},
				{Scope: OnRoute, Limits: []core.Limit{fixed(1, minute, "search")}, Options: opts(guard.WithDryRun(true))},
			},
			Watch: []Watch{{0, ipA}, {1, ipA}},
			Steps: []Step{
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{4, 0}, Want: header(hLimit, `"app";r=4;t=60, "search";r=0;t=60`)},
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{3, 0}, Want: header(hLimit, `"app";r=3;t=60, "search";r=0;t=60`, hRetry, notFound)},
			},
		},
		{
			Name: "WithRefundOn(NotPassed) on the app-wide middleware still refunds the application's own 429s",
			Stack: []StackLayer{
				{Scope: AppWide, Limits: []core.Limit{fixed(2, minute, "app")}, Options: opts(guard.WithRefundOn(guard.NotPassed))},
				{Scope: OnRoute, Limits: []core.Limit{fixed(5, minute, "search")}},
			},
			Watch: []Watch{{0, ipA}, {1, ipA}},
			Steps: []Step{
				{Target: RoutePath + "?status=429", Status: 429, Body: "ok", Remaining: []int64{2, 4}},
				{Target: RoutePath + "?status=503", Status: 503, Body: "ok", Remaining: []int64{2, 3}},
				{Target: RoutePath, Status: 200, Body: "ok", Remaining: []int64{1, 2}},
			},
		},
	}
}
