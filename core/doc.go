// Package core is Tollgate's framework-neutral rate-limiting engine: limits,
// the seven algorithms, decisions, the Store interface and the Limiter.
//
// # Model
//
// A Limit allows Quota cost units per Period. A request carries a cost (1 by
// default; more for expensive endpoints; known only afterwards for some) and
// is checked against one or more limits at once, atomically: every limit is
// checked first, and only if all admit the cost is each one charged. A
// denied request changes nothing. Being limited is not an error: it is a
// Decision with Allowed false, a RetryAfter, and the binding Limit.
//
// Post-hoc cost is first class: admit a request at an estimate with AllowN,
// then settle the difference with Charge (which may push usage past the
// quota, so later requests wait) or Refund (never below zero usage).
//
// # Algorithms
//
// Each Algorithm is a pure function of (state, now, cost), implemented once
// in Step and shared by every store; the Redis store's Lua is a port that
// the storetest suite holds to identical results. With Q = Quota,
// P = Period, B = Burst (default Q), c = cost and t = now:
//
//	FixedWindow     count + c ≤ Q, windows ⌊t/P⌋ aligned to the epoch
//	SlidingWindow   prev·(P−e) + (cur+c)·P ≤ Q·P, e = time into the window
//	SlidingLog      Σ cost of entries younger than P, + c ≤ Q
//	BucketedWindow  Σ counts of the last P/p buckets of size p, + c ≤ Q
//	TokenBucket     min(B, tokens + (t−last)·Q/P) ≥ c
//	GCRA            max(TAT, t) + c·T − B·T ≤ t, T = P/Q
//	LeakyBucket     GCRA's condition; served after Delay = max(TAT−t, 0)
//
// Time is integer microseconds and every comparison is exact integer
// arithmetic, never a float division: the sliding window compares products,
// the token bucket counts tokens × P so that a refill of Q/P per µs is Q per
// µs, and GCRA keeps TAT as whole ticks plus a remainder over Q. Limits
// whose products could pass 2^47 compute in a coarser tick (10µs … 1s) and
// post-hoc debt saturates at DebtFactor × capacity, so that every
// intermediate value stays below 2^53, where IEEE doubles (Lua's numbers)
// are exact too. Limit.Validate rejects what cannot be computed exactly.
//
// # Stores and the Limiter
//
// A Store applies an Op (Take, Peek, Charge, Refund or Reset of a cost over
// a key's limits) atomically. The memstore package is the embedded default;
// the redisstore module shares state across a fleet. A Limiter binds a
// Store to limits (or to a function choosing limits per key, for plans and
// tiers) and offers Allow, AllowN, Peek, PeekN, Charge, Refund and Reset.
// All are safe for concurrent use.
package core
