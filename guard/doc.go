// Package guard is the request flow of Tollgate's HTTP middleware, written
// once for every framework, and the encoding of the rate-limit headers and
// of the 429 response.
//
// # The flow
//
// For each request, Guard.Serve runs:
//
//	skip?   WithSkip: pass straight to the handler
//	key     each rule's key function (default keyfuncs.IP())
//	cost    WithCost (default 1) or WithCostFunc
//	admit   WithAdaptive: the adaptive concurrency limit admits the request
//	        or sheds it (503, Retry-After, problem type
//	        ProblemTypeOverloaded), before any rule charges it
//	decide  core.Limiter.AllowN on every rule, in order, once per limiter
//	        state on the request's chain; a denial stops the walk and
//	        refunds what the chain took
//	wait    a LeakyBucket Decision.Delay: wait, cancelled with the request's
//	        context, up to WithMaxDelay; a longer delay is denied. Either
//	        way the request is refunded, and its turn in the queue comes
//	        back while it is the last one, else passes empty
//	headers RateLimit-Policy and RateLimit (WithHeaders), set before the
//	        handler runs, since net/http cannot add headers afterwards
//	deny    429 with Retry-After and a problem+json body (WithDeniedHandler)
//	next    the handler
//	settle  WithRefundOn, WithReportedCost, WithResponseCost: refund or
//	        charge the difference between the admitted and the real cost;
//	        release the adaptive limit's unit, with the handler's latency
//
// Errors (a key function that fails, a store that fails or hangs past the
// request's context) go to the ErrorHandler, whose default answers with a
// status chosen by ErrorStatus (400 for a key the request lacks, with a
// detail that says which, 503 for a store failure) and a generic body:
// error text never reaches a client. WithDryRun decides, counts and sets
// headers but never blocks.
//
// A panic in a configured function (a key, cost or skip function, a
// DeniedHandler, an ErrorHandler, a hook) propagates unchanged to the
// framework's recovery, but first what the request's chain took is
// refunded: a misbehaving function never leaves a charge behind. A panic
// in the handler propagates once the request is settled as a 500.
//
// # Stacked middlewares are one decision
//
// A request may cross several Tollgate middlewares: app-wide, on a group,
// on a route, of one adapter or of several (a gin engine mounted in a
// nethttp middleware). By default they act as one decision, through the
// Chain the request carries from one to the next:
//
//   - a request one of them denies (or fails) leaves no charge in any
//     other: no option is needed (WithRefundOn(NotPassed) still refunds
//     what the application itself answers with 429 or 5xx);
//   - a limiter state (a Limiter's scope, its store and a key) is charged
//     at most once per request: limiters configured alike and stacked, or
//     two rules of one Limiter on one key, count the request once; when
//     they ask different costs, the largest is charged, once;
//   - every middleware's headers describe the whole chain, each policy
//     once, under a name unique in the response (see HeadersDraft11), and
//     the draft-06 and legacy fields the most restrictive remaining of all;
//   - RateLimit-Policy lists the same policies on every response of a
//     route, 429s included: when a middleware denies a request before the
//     ones inside it ran, it lists after its own (and after its later
//     rules', which it did not consult) the policies those listed on the
//     last request of the same route that passed them all. It knows the
//     route when the adapter does before the handler runs (gin's FullPath,
//     echo's Path, net/http's Pattern inside the mux that matched it, the
//     route of fiber's route handlers; see RoutePatterner): a middleware
//     around a net/http mux, added with fiber's app.Use or to a fiber
//     group, or chi's r.Use, does not, and its own 429s list its policies
//     and those of the middlewares around it only. It remembers up to 1024
//     routes, the first ones seen.
//
// # Writing an adapter
//
// An adapter implements two small interfaces over its framework, and
// translates: keyfuncs.Request (the request view, shared with the key
// functions) and Writer (set a header; write a status and a body), which
// should be a ChainWriter carrying the request's Chain: its own, kept in a
// value it allocates per request anyway (or pools: then Chain.Keep), or
// the one of an outer Tollgate middleware, found with FindChain; and it
// must hand the chain on to the rest of the chain, where FindChain finds
// it (in a response writer with a Chain method, or in the framework's
// per-request storage). Then, in its middleware:
//
//	g, err := guard.New(lim, opts...)           // once; panic on err
//	...
//	return g.Serve(req, w, func(ctx context.Context) guard.Result {
//		// pass ctx on when g.ReportsCost() (only then is it not the
//		// request's own context), call the next handler, and, if
//		// g.NeedsResult(), report the status and body size it wrote
//	})
//
// Framework-typed options (a key function over *gin.Context, echo's
// Skipper, a denied handler writing through the framework) are
// translations into Options: the adapter's Request and Writer carry the
// framework's context, so a translated function type-asserts them.
//
// Bad configuration fails in New, never on a request: every option that
// takes a function rejects nil (leave the option out for its default), and
// New's error wraps ErrInvalidOption and names the option. An adapter's
// own option rejects its arguments the same way, with Invalid:
//
//	if fn == nil {
//		return guard.Invalid("WithSkipper", "nil function")
//	}
//
// # Headers
//
// The default, HeadersDraft11, sends the Structured Field Lists of
// draft-ietf-httpapi-ratelimit-headers-11:
//
//	RateLimit-Policy: "per-minute";q=100;w=60, "per-hour";q=1000;w=3600
//	RateLimit: "per-minute";r=42;t=17
//
// q and w are the quota and its window in whole seconds, scaled to the
// same rate when the period is not whole seconds; qu is the limit's Unit.
// r is the units remaining and t the effective window, draft-11 §4.1.2:
// "the number of seconds within which the client can use no more than the
// available quota", rounded up, a delta, never an epoch (see
// HeadersDraft11). On a 429, Retry-After is the time until the denied cost
// could pass, in whole seconds rounded up (at least 1), and never earlier
// than the t of the denying limit's item (draft-11 §6: "the Retry-After
// field value SHOULD NOT reference a point in time earlier than the end of
// the effective window"). A cost above a limit's capacity can never pass:
// its 429 has the problem type ProblemTypeCapacity, with the cost and the
// capacity, no Retry-After, because any finite value would promise a
// success that will not come, and no RateLimit item for that limit, whose
// quota would invite the same retry.
//
// A request that a Limiter's FailOpen policy admitted while its store
// fails (core.FromFailOpen) has no numbers to send: its rule's policies
// (core.Limiter.Limits for the key) are listed in RateLimit-Policy as on
// every other response, but the rule has no RateLimit item, and nothing
// in the draft-06 and legacy styles; a response with no other rule then
// carries RateLimit-Policy alone. A Fallback policy's decisions carry the
// fallback store's numbers, and are sent as usual.
package guard
