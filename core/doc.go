// Package core is Tollgate's rate limiter, without HTTP: limits, the
// Limiter that applies them to keys, its decisions, and the Store it keeps
// state in.
//
//	lim, err := core.New(memstore.New(), core.PerSecond(10), core.PerMinute(120))
//	d, err := lim.AllowN(ctx, key, 5) // a request that costs 5 units
//	if !d.Allowed {
//		// d.RetryAfter: until the same cost could pass (Never if it never can)
//	}
//
// # Model
//
// A Limit allows Quota cost units per Period, counted by an Algorithm. A
// request carries a cost (1 by default; more for expensive endpoints; known
// only afterwards for some) and is checked against one or more limits at
// once, atomically: every limit is checked first, and only if all admit
// the cost is each one charged. A denied request changes nothing. Being
// limited is not an error: it is a Decision with Allowed false, a
// RetryAfter, and the binding Limit.
//
// Post-hoc cost is first class: admit a request at an estimate with AllowN,
// then settle the difference with Charge (which may push usage past the
// quota, so later requests wait) or Refund (never below zero usage).
//
// # Algorithms
//
// With Q = Quota, P = Period, B = Burst (default Q), c = cost and t = now,
// a cost passes when (each Algorithm constant says more):
//
//	FixedWindow     count + c ≤ Q, windows ⌊t/P⌋ aligned to the epoch
//	SlidingWindow   prev·(P−e) + (cur+c)·P ≤ Q·P, e = time into the window
//	SlidingLog      Σ cost of entries younger than P, + c ≤ Q
//	BucketedWindow  Σ counts of the last P/p buckets of size p, + c ≤ Q
//	TokenBucket     min(B, tokens + (t−last)·Q/P) ≥ c
//	GCRA            max(TAT, t) + c·T − B·T ≤ t, T = P/Q
//	LeakyBucket     GCRA's condition; served after Delay = max(TAT−t, 0)
//
// Under saturation (requests without pause) each admits Q a period
// (TokenBucket, GCRA and LeakyBucket at the rate Q/P after the first
// burst of B), except SlidingWindow: Q−1 a period, since the previous
// window weighs until the current one ends (Q = 1: one every other
// period). This matters most for small limits, such as a fleet's share of
// a limit while its store is down (FleetSize).
//
// Time is integer microseconds and the arithmetic is integer: every
// decision is exact, to the microsecond, for every limit Limit.Validate
// accepts. When Capacity × Period passes 2^47µs (a wide limit, such as
// 1e9 an hour), products pass 2^53 and are computed in 128 bits (in the
// Redis store's Lua, by an exact routine), at some nanoseconds more.
// Such limits once counted time in coarse ticks of 10^k µs, a little
// stricter than exact; a key's state kept under one starts afresh once.
//
// # Stores
//
// A Store keeps each key's state and applies an operation to it
// atomically: memstore (in memory, the default) and redisstore (Redis, for
// a fleet) give the same decisions, since both run the one step function
// of package core/engine, which only store authors need. A Limiter
// compiles its limits once, at New, and hands the store a reference to
// them with each operation. When a store that is not in the process fails,
// a FailurePolicy answers, and a circuit Breaker keeps a dead store from
// costing a timeout per call.
//
// # Operating it
//
// A Limiter logs, through log/slog (slog.Default() unless WithLogger says
// otherwise), what an operator must know: a store failure, the first of a
// burst at once and then, while the burst lasts, a line a second that
// counts the rest, per cause (the error at the root of the chain, such as
// "dial tcp 10.0.0.7:6379: connect: connection refused", never the key);
// its circuit breakers opening (error level) and closing (info). Stores
// log their own: memstore its lossy evictions, redisstore the failures its
// workers see after the caller gave up.
//
// An Observer (WithObserver) sees every decision (limiter, operation,
// policy, outcome, cost, wait, store latency, error) and every event
// (breaker transitions, and through the stores' own options evictions, key
// counts, Redis script loads, compensations, redirects, topology reloads):
// the modules promlimit and otellimit turn them into Prometheus and
// OpenTelemetry metrics and spans. Without an observer a decision costs a
// nil check more; with one, no allocation.
//
// Every method of a Limiter is safe for concurrent use.
package core
