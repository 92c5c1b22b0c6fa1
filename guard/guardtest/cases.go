package guardtest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

const (
	hPolicy  = "RateLimit-Policy"
	hLimit   = "RateLimit"
	hRetry   = "Retry-After"
	hType    = "Content-Type"
	problem  = "application/problem+json"
	perMin   = `"per-minute";q=2;w=60`
	plain    = "text/plain; charset=utf-8"
	minute   = time.Minute
	clientA  = "192.0.2.1:1234"
	clientB  = "198.51.100.7:9"
	notFound = ""
)

// Cases returns the conformance table. Each call returns fresh values.
func Cases() []Case {
	return append(single(), stacked()...)
}

// single returns the cases of one middleware.
func single() []Case {
	return []Case{
		{
			Name:   "by default the client IP is the key, draft-11 headers are sent and the request over quota gets a 429 problem",
			Limits: []core.Limit{fixed(2, minute, "per-minute")},
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header(hPolicy, perMin, hLimit, `"per-minute";r=1;t=60`, hRetry, notFound, hType, plain)},
				{Advance: 1500 * time.Millisecond, Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=0;t=59`)},
				{Status: 429, Body: Problem429(59, "per-minute"), Want: header(hPolicy, perMin, hLimit, `"per-minute";r=0;t=59`, hRetry, "59", hType, problem)},
				{RemoteAddr: clientB, Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=1;t=59`)},
				{RemoteAddr: "[2001:db8::1]:1", Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=1;t=59`)},
				{RemoteAddr: "[2001:db8::2]:2", Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=0;t=59`)},
				{Advance: minute, Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=1;t=59`, hRetry, notFound)},
			},
		},
		{
			Name:    "a cost above the capacity gets a problem of its own, without Retry-After or a RateLimit item that would invite a retry",
			Limits:  []core.Limit{fixed(2, minute, "per-minute")},
			Options: opts(guard.WithCost(3)),
			Steps: []Step{
				{Status: 429, Body: ProblemCapacity(3, 2, "", "per-minute"), Want: header(hPolicy, perMin, hLimit, notFound, hRetry, notFound, hType, problem)},
			},
		},
		{
			Name:    "a static cost takes that many units per request",
			Limits:  []core.Limit{fixed(5, minute, "per-minute")},
			Options: opts(guard.WithCost(2)),
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=3;t=60`)},
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=1;t=60`)},
				{Status: 429, Body: Problem429(60, "per-minute"), Want: header(hLimit, `"per-minute";r=1;t=60`, hRetry, "60")},
			},
		},
		{
			Name:   "a per-request cost is read from the request, and a bad one is a 400",
			Limits: []core.Limit{fixed(10, minute, "per-minute")},
			Options: opts(guard.WithCostFunc(func(r keyfuncs.Request) (int64, error) {
				s := r.Header("X-Cost")
				if s == "" {
					return 1, nil
				}
				return strconv.ParseInt(s, 10, 64)
			})),
			Steps: []Step{
				{Header: map[string]string{"X-Cost": "4"}, Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=6;t=60`)},
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=5;t=60`)},
				{Header: map[string]string{"X-Cost": "lots"}, Status: 400, Body: ProblemStatus(400), Want: header(hLimit, notFound, hPolicy, notFound, hType, problem)},
				{Header: map[string]string{"X-Cost": "-1"}, Status: 500, Body: ProblemStatus(500), Want: header(hLimit, notFound)},
				{Header: map[string]string{"X-Cost": "6"}, Status: 429, Body: Problem429(60, "per-minute"), Want: header(hLimit, `"per-minute";r=5;t=60`)},
				{Header: map[string]string{"X-Cost": "5"}, Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=0;t=60`)},
			},
		},
		{
			Name:   "a key from a header counts per value, and a request without it or with a huge one is a 400 that says what is wrong",
			Limits: []core.Limit{fixed(1, minute, "per-key")},
			// Configured as "X-API-Key": the 400 names it so, not in its
			// canonical form "X-Api-Key", and any case of it in a request
			// counts.
			Options: opts(guard.WithKey(keyfuncs.Header("X-API-Key"))),
			Steps: []Step{
				{Header: map[string]string{"X-Api-Key": "a"}, Status: 200, Body: "ok", Want: header(hLimit, `"per-key";r=0;t=60`)},
				{Header: map[string]string{"x-api-key": "a"}, Status: 429, Body: Problem429(60, "per-key")},
				{Header: map[string]string{"X-API-Key": "b"}, Status: 200, Body: "ok"},
				{Status: 400, Body: ProblemDetail(400, "missing header X-API-Key"), Want: header(hLimit, notFound, hType, problem)},
				{Header: map[string]string{"X-Api-Key": strings.Repeat("k", 64<<10)}, Status: 400, Body: ProblemDetail(400, "header X-API-Key is longer than 1024 bytes")},
			},
		},
		{
			Name:   "skipped requests pass without headers and are not counted",
			Limits: []core.Limit{fixed(1, minute, "per-minute")},
			Options: opts(guard.WithSkip(func(r keyfuncs.Request) bool {
				return r.Path() == "/health"
			})),
			Steps: []Step{
				{Target: "/health", Status: 200, Body: "ok", Want: header(hLimit, notFound, hPolicy, notFound)},
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=0;t=60`)},
				{Target: "/health", Status: 200, Body: "ok", Want: header(hLimit, notFound)},
				{Status: 429, Body: Problem429(60, "per-minute")},
			},
		},
		{
			Name:   "a failing store gives a 503 with a generic body and no rate-limit headers",
			Limits: []core.Limit{fixed(1, minute, "per-minute")},
			Store:  func() core.Store { return FailingStore{} },
			Steps: []Step{
				{Status: 503, Body: ProblemStatus(503), Want: header(hLimit, notFound, hPolicy, notFound, hRetry, notFound, hType, problem)},
			},
		},
		{
			Name:           "under FailOpen a failing store lets requests pass, listing the configured policies without a RateLimit item",
			Limits:         []core.Limit{fixed(1, minute, "per-minute"), fixed(3, time.Hour, "per-hour")},
			Store:          func() core.Store { return FailingStore{} },
			LimiterOptions: []core.Option{core.WithFailurePolicy(core.FailOpen)},
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header(hPolicy, `"per-minute";q=1;w=60, "per-hour";q=3;w=3600`, hLimit, notFound, hRetry, notFound, hType, plain)},
				{Status: 200, Body: "ok", Want: header(hPolicy, `"per-minute";q=1;w=60, "per-hour";q=3;w=3600`, hLimit, notFound)},
			},
		},
		{
			Name:    "dry run lets would-be denials pass, with headers and without Retry-After",
			Limits:  []core.Limit{fixed(1, minute, "per-minute")},
			Options: opts(guard.WithDryRun(true)),
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=0;t=60`)},
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=0;t=60`, hRetry, notFound, hType, plain)},
			},
		},
		{
			Name:    "dry run lets requests pass when the store fails",
			Limits:  []core.Limit{fixed(1, minute, "per-minute")},
			Store:   func() core.Store { return FailingStore{} },
			Options: opts(guard.WithDryRun(true)),
			Steps:   []Step{{Status: 200, Body: "ok", Want: header(hLimit, notFound)}},
		},
		{
			Name:   "several rules apply in order and a later denial refunds the earlier rules",
			Limits: []core.Limit{fixed(3, minute, "per-ip")},
			Options: func(lims func(...core.Limit) *core.Limiter) []guard.Option {
				user := keyfuncs.Join(":", keyfuncs.Static("user"), keyfuncs.Header("X-User"))
				return []guard.Option{guard.WithRule(lims(fixed(1, minute, "per-user")), guard.Optional(user))}
			},
			Steps: []Step{
				{Header: map[string]string{"X-User": "alice"}, Status: 200, Body: "ok", Want: header(
					hPolicy, `"per-ip";q=3;w=60, "per-user";q=1;w=60`, hLimit, `"per-ip";r=2;t=60, "per-user";r=0;t=60`)},
				// per-ip took this request's unit and gave it back when
				// per-user denied: its item shows the state after the refund.
				{Header: map[string]string{"X-User": "alice"}, Status: 429, Body: Problem429(60, "per-user"), Want: header(
					hPolicy, `"per-ip";q=3;w=60, "per-user";q=1;w=60`, hLimit, `"per-ip";r=2;t=60, "per-user";r=0;t=60`, hRetry, "60")},
				// 3 − alice − this = 1: alice's denied request was refunded.
				{Status: 200, Body: "ok", Want: header(hPolicy, `"per-ip";q=3;w=60`, hLimit, `"per-ip";r=1;t=60`)},
				{Header: map[string]string{"X-User": "bob"}, Status: 200, Body: "ok", Want: header(hLimit, `"per-ip";r=0;t=60, "per-user";r=0;t=60`)},
				// per-ip denies before per-user is asked: per-user's policy
				// is listed all the same, as on the requests that pass.
				{Header: map[string]string{"X-User": "carol"}, Status: 429, Body: Problem429(60, "per-ip"), Want: header(
					hPolicy, `"per-ip";q=3;w=60, "per-user";q=1;w=60`, hLimit, `"per-ip";r=0;t=60`, hRetry, "60")},
			},
		},
		{
			Name:    "responses with a chosen status are refunded",
			Limits:  []core.Limit{fixed(1, minute, "per-minute")},
			Options: opts(guard.WithRefundOn(guard.ServerErrors)),
			Steps: []Step{
				{Target: "/?status=503", Status: 503, Body: "ok", Want: header(hLimit, `"per-minute";r=0;t=60`)},
				{Target: "/?status=500", Status: 500, Body: "ok", Want: header(hLimit, `"per-minute";r=0;t=60`)},
				{Target: "/?status=404", Status: 404, Body: "ok", Want: header(hLimit, `"per-minute";r=0;t=60`)},
				{Status: 429, Body: Problem429(60, "per-minute")},
			},
		},
		{
			Name:    "a cost the handler reports is charged after it",
			Limits:  []core.Limit{fixed(10, minute, "per-minute")},
			Options: opts(guard.WithReportedCost()),
			Steps: []Step{
				{Target: "/?report=5", Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=9;t=60`)},
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=4;t=60`)},
				{Target: "/?report=0", Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=3;t=60`)},
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=3;t=60`)},
			},
		},
		{
			Name:   "a cost computed from the response is settled after it",
			Limits: []core.Limit{fixed(10, minute, "per-minute")},
			Options: opts(guard.WithResponseCost(func(r guard.Result) int64 {
				return r.Bytes
			})),
			Steps: []Step{
				{Target: "/?body=abcd", Status: 200, Body: "abcd", Want: header(hLimit, `"per-minute";r=9;t=60`)},
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=5;t=60`)},
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=3;t=60`)},
			},
		},
		{
			Name:    "draft-06 headers are sent on request",
			Limits:  []core.Limit{fixed(2, minute, "per-minute")},
			Options: opts(guard.WithHeaders(guard.HeadersDraft06)),
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header(hPolicy, "2;w=60", "RateLimit-Limit", "2", "RateLimit-Remaining", "1", "RateLimit-Reset", "60", hLimit, notFound)},
				{Status: 200, Body: "ok", Want: header("RateLimit-Remaining", "0")},
				{Status: 429, Body: Problem429(60, "per-minute"), Want: header("RateLimit-Remaining", "0", "RateLimit-Reset", "60", hRetry, "60")},
			},
		},
		{
			Name:    "legacy X-RateLimit headers are sent on request",
			Limits:  []core.Limit{fixed(1, minute, "per-minute")},
			Options: opts(guard.WithHeaders(guard.HeadersLegacy)),
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header("X-RateLimit-Limit", "1", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60", hPolicy, notFound, hLimit, notFound)},
				{Status: 429, Body: Problem429(60, "per-minute"), Want: header("X-RateLimit-Remaining", "0", hRetry, "60")},
			},
		},
		{
			Name:    "with no headers a 429 still carries Retry-After",
			Limits:  []core.Limit{fixed(1, minute, "per-minute")},
			Options: opts(guard.WithHeaders(guard.HeadersNone)),
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header(hPolicy, notFound, hLimit, notFound)},
				{Status: 429, Body: Problem429(60, "per-minute"), Want: header(hPolicy, notFound, hLimit, notFound, hRetry, "60")},
			},
		},
		{
			Name:   "several limits are all listed in the policy and the binding one in RateLimit",
			Limits: []core.Limit{fixed(2, minute, "per-minute"), fixed(3, time.Hour, "per-hour")},
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header(hPolicy, `"per-minute";q=2;w=60, "per-hour";q=3;w=3600`, hLimit, `"per-minute";r=1;t=60`)},
				{Status: 200, Body: "ok", Want: header(hLimit, `"per-minute";r=0;t=60`)},
				{Advance: minute, Status: 200, Body: "ok", Want: header(hLimit, `"per-hour";r=0;t=3540`)},
				{Status: 429, Body: Problem429(3540, "per-hour"), Want: header(hLimit, `"per-hour";r=0;t=3540`, hRetry, "3540")},
			},
		},
		{
			Name:   "a concurrency limit holds a unit while the handler runs and gets it back after, whatever the status",
			Limits: []core.Limit{core.InFlight(2, minute).Named("in-flight")},
			Watch:  []Watch{{Key: "192.0.2.1"}},
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header(hPolicy, `"in-flight";q=2;qu="concurrent-requests";w=60`, hLimit, `"in-flight";r=1;t=60`), Remaining: []int64{2}},
				// A millisecond apart: a lease taken in the µs of the key's
				// newest is one µs later, and lasts one µs longer (t=61).
				{Advance: time.Millisecond, Status: 200, Body: "ok", Want: header(hLimit, `"in-flight";r=1;t=60`), Remaining: []int64{2}},
				{Advance: time.Millisecond, Target: "/?status=500&body=no", Status: 500, Body: "no", Want: header(hLimit, `"in-flight";r=1;t=60`), Remaining: []int64{2}},
				{Advance: time.Second, Status: 200, Body: "ok", Want: header(hLimit, `"in-flight";r=1;t=60`), Remaining: []int64{2}},
			},
		},
		{
			Name:   "a denied handler writes its own response after the headers are set",
			Limits: []core.Limit{fixed(1, minute, "per-minute")},
			Options: opts(guard.WithDeniedHandler(func(w guard.Writer, _ keyfuncs.Request, d *guard.Denial) error {
				w.SetHeader("Content-Type", "text/plain")
				return w.WriteResponse(http.StatusServiceUnavailable, []byte("slow down: "+strings.Join(d.Policies, ",")))
			})),
			Steps: []Step{
				{Status: 200, Body: "ok"},
				{Status: 503, Body: "slow down: per-minute", Want: header(hLimit, `"per-minute";r=0;t=60`, hRetry, "60", hType, "text/plain")},
			},
		},
		{
			Name:   "an error handler writes its own response",
			Limits: []core.Limit{fixed(1, minute, "per-minute")},
			Store:  func() core.Store { return FailingStore{} },
			Options: opts(guard.WithErrorHandler(func(w guard.Writer, _ keyfuncs.Request, err error) error {
				w.SetHeader("Content-Type", "text/plain")
				return w.WriteResponse(guard.ErrorStatus(err), []byte("try later"))
			})),
			Steps: []Step{{Status: 503, Body: "try later", Want: header(hType, "text/plain", hLimit, notFound)}},
		},
		{
			Name:    "a LeakyBucket request waits its turn, and one queued past the max delay is denied",
			Limits:  []core.Limit{core.Per(100, time.Second).WithAlgorithm(core.LeakyBucket).Named("leaky")},
			Options: opts(guard.WithMaxDelay(15 * time.Millisecond)),
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header(hPolicy, `"leaky";q=100;w=1`, hLimit, `"leaky";r=99;t=1`)},
				{Status: 200, Body: "ok", Want: header(hLimit, `"leaky";r=98;t=1`)},
				// Queued past the max delay: denied, and its unit refunded.
				{Status: 429, Body: Problem429(1, "leaky"), Want: header(hLimit, `"leaky";r=98;t=1`, hRetry, "1")},
				{Advance: time.Second, Status: 200, Body: "ok", Want: header(hLimit, `"leaky";r=99;t=1`)},
			},
		},
		{
			Name:   "policy names are sent as escaped sf-strings",
			Limits: []core.Limit{fixed(1, minute, `say "hi" \ ok`)},
			Steps: []Step{
				{Status: 200, Body: "ok", Want: header(hPolicy, `"say \"hi\" \\ ok";q=1;w=60`, hLimit, `"say \"hi\" \\ ok";r=0;t=60`)},
				{Status: 429, Body: Problem429(60, `say \"hi\" \\ ok`)},
			},
		},
		{
			Name:   "client-sent forwarding and rate-limit headers change nothing",
			Limits: []core.Limit{fixed(1, minute, "per-minute")},
			Steps: []Step{
				{Header: map[string]string{"X-Forwarded-For": "203.0.113.9", hLimit: `"x";r=999;t=0`}, Status: 200, Body: "ok",
					Want: header(hLimit, `"per-minute";r=0;t=60`)},
				{Header: map[string]string{"X-Forwarded-For": "203.0.113.10", "Forwarded": "for=203.0.113.11"}, Status: 429, Body: Problem429(60, "per-minute")},
			},
		},
		{
			Name:    "a header key function keys clients behind a shared address apart",
			Limits:  []core.Limit{fixed(1, minute, "per-client")},
			Options: opts(guard.WithKey(keyHeader())),
			Steps: []Step{
				{RemoteAddr: clientA, Header: map[string]string{"X-Client": "one"}, Status: 200, Body: "ok"},
				{RemoteAddr: clientA, Header: map[string]string{"X-Client": "two"}, Status: 200, Body: "ok"},
				{RemoteAddr: clientA, Header: map[string]string{"X-Client": "one"}, Status: 429, Body: Problem429(60, "per-client")},
			},
		},
	}
}

// opts returns a Case.Options that ignores the limiter factory.
func opts(o ...guard.Option) func(func(...core.Limit) *core.Limiter) []guard.Option {
	return func(func(...core.Limit) *core.Limiter) []guard.Option { return o }
}
