package guard

import (
	"strconv"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/keyfuncs"
)

// A Denial describes a denied request, for the DeniedHandler and the
// OnDenied hook.
type Denial struct {
	// Rule is the index of the rule that denied: 0 for the Limiter passed
	// to New, then the rules of WithRule in order; -1 for a request the
	// adaptive limit shed (Overloaded).
	Rule int
	// Key is that rule's key.
	Key string
	// Cost is the request's cost.
	Cost int64
	// Decision is that rule's decision. Decision.Allowed is true when the
	// request was denied for its queueing delay (Queued).
	Decision core.Decision
	// RetryAfter is the Retry-After sent, a whole number of seconds, at
	// least 1: the time until the denied cost could pass, rounded up, and
	// never earlier than the t of the denying rule's RateLimit item. It is
	// 0 when none is sent because the cost exceeds a limit's capacity
	// (Capacity): no wait would let it pass, so no wait is advertised.
	RetryAfter time.Duration
	// Capacity is, when the cost exceeds the capacity of one of the
	// denying rule's limits (core.Decision.RetryAfter is core.Never), that
	// limit's capacity (core.Limit.Capacity): the request can never pass,
	// and Problem says so with a problem type of its own. 0 otherwise.
	Capacity int64
	// Policies are the names of the violated policies, as in the
	// RateLimit headers.
	Policies []string
	// Queued reports a denial for a LeakyBucket delay over the maximum
	// (WithMaxDelay) rather than for quota; Retry-After is then the excess.
	Queued bool
	// DryRun reports that the request is not blocked (WithDryRun).
	DryRun bool
	// Overloaded reports a request the adaptive limit shed (WithAdaptive):
	// the server is overloaded, not the client over a quota. Key,
	// Decision and Policies are then empty, and RetryAfter is when
	// capacity is likely back (adaptive.Limiter.RetryAfter), rounded up
	// to whole seconds, at least 1. DefaultDeniedHandler answers it 503
	// with the problem type ProblemTypeOverloaded.
	Overloaded bool
}

// violatedLimits returns the indexes, among d's limits, of those that
// deny: for a queued denial, those whose delay exceeds maxDelay. When none
// does, the binding limit's.
func violatedLimits(d *core.Decision, queued bool, maxDelay time.Duration) []int {
	var out []int
	j, bind := 0, 0
	d.Each(func(s core.LimitState) {
		if (!queued && !s.Allowed) || (queued && s.Delay > maxDelay) {
			out = append(out, j)
		}
		if s.Limit == d.Limit {
			bind = j
		}
		j++
	})
	if len(out) == 0 {
		out = append(out, bind)
	}
	return out
}

// A DeniedHandler writes the response to a denied request through w,
// whose rate-limit headers and Retry-After are already set. Adapters pass
// their own Writer: a handler written for one adapter may type-assert w
// (and r) to reach the framework's context.
type DeniedHandler func(w Writer, r keyfuncs.Request, d *Denial) error

// An ErrorHandler writes the response to a request that cannot be
// decided. err wraps one of ErrKey, ErrCost, ErrLimiter and ErrWait, and
// the error behind it. It must not send err's text to the client.
type ErrorHandler func(w Writer, r keyfuncs.Request, err error) error

// ProblemType is the problem type of a 429 body: quota exceeded, from the
// IANA HTTP Problem Types registry.
const ProblemType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// ProblemTypeCapacity is the problem type of a 429 for a request whose cost
// exceeds a limit's capacity: it can never pass, however long the client
// waits. It is described in this repository's docs/problems.md.
const ProblemTypeCapacity = "https://github.com/tollgate/tollgate/blob/main/docs/problems.md#request-exceeds-capacity"

// ProblemTypeOverloaded is the problem type of a 503 for a request the
// adaptive concurrency limit shed (Denial.Overloaded): the server is
// overloaded; the client may retry after Retry-After, here or elsewhere.
// It is described in this repository's docs/problems.md.
const ProblemTypeOverloaded = "https://github.com/tollgate/tollgate/blob/main/docs/problems.md#server-overloaded"

// ContentTypeProblem is the media type of RFC 9457 problem details.
const ContentTypeProblem = "application/problem+json"

// DefaultDeniedHandler answers 429 Too Many Requests with an
// application/problem+json body (RFC 9457), d.Problem(); a request the
// adaptive limit shed (d.Overloaded), 503 Service Unavailable.
func DefaultDeniedHandler(w Writer, _ keyfuncs.Request, d *Denial) error {
	w.SetHeader(HeaderContentType, ContentTypeProblem)
	if d.Overloaded {
		return w.WriteResponse(503, d.Problem())
	}
	return w.WriteResponse(429, d.Problem())
}

// Problem returns the RFC 9457 problem details of d, in JSON, on one line:
//
//	{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
//	"title":"Too Many Requests","status":429,"detail":"Retry after 17 seconds.",
//	"violated-policies":["per-minute"]}
//
// or, for a cost above a limit's capacity (Capacity), which can never pass:
//
//	{"type":"https://github.com/tollgate/tollgate/blob/main/docs/problems.md#request-exceeds-capacity",
//	"title":"Request Exceeds Capacity","status":429,
//	"detail":"The request costs 10 units; the policy admits at most 5 in one request, so it can never pass.",
//	"cost":10,"capacity":5,"violated-policies":["5-per-1m"]}
//
// or, for a request the adaptive limit shed (Overloaded):
//
//	{"type":"https://github.com/tollgate/tollgate/blob/main/docs/problems.md#server-overloaded",
//	"title":"Service Unavailable","status":503,
//	"detail":"The server is overloaded. Retry after 1 second."}
func (d *Denial) Problem() []byte {
	b := make([]byte, 0, 256)
	if d.Overloaded {
		b = append(b, `{"type":"`+ProblemTypeOverloaded+`","title":"Service Unavailable","status":503,"detail":"The server is overloaded. Retry after `...)
		b = appendSeconds(b, d.RetryAfter)
		return append(b, ".\"}"...)
	}
	if d.Capacity > 0 {
		unit := "units"
		if u := d.Decision.Limit.Unit; u != "" {
			unit = u // an sf-token: nothing to escape in JSON
		}
		b = append(b, `{"type":"`+ProblemTypeCapacity+`","title":"Request Exceeds Capacity","status":429,"detail":"The request costs `...)
		b = strconv.AppendInt(b, d.Cost, 10)
		b = append(b, ' ')
		b = append(b, unit...)
		b = append(b, "; the policy admits at most "...)
		b = strconv.AppendInt(b, d.Capacity, 10)
		b = append(b, ` in one request, so it can never pass.","cost":`...)
		b = strconv.AppendInt(b, d.Cost, 10)
		b = append(b, `,"capacity":`...)
		b = strconv.AppendInt(b, d.Capacity, 10)
	} else {
		b = append(b, `{"type":"`+ProblemType+`","title":"Too Many Requests","status":429,"detail":"Retry after `...)
		b = appendSeconds(b, d.RetryAfter)
		b = append(b, `."`...)
	}
	b = append(b, `,"violated-policies":[`...)
	for i, p := range d.Policies {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSFString(b, p) // for printable ASCII, an sf-string is a JSON string
	}
	return append(b, "]}"...)
}

// appendSeconds appends "n second(s)", d in whole seconds rounded up, at
// least 1.
func appendSeconds(b []byte, d time.Duration) []byte {
	n := max(1, ceilSeconds(d))
	b = strconv.AppendInt(b, n, 10)
	if n == 1 {
		return append(b, " second"...)
	}
	return append(b, " seconds"...)
}
