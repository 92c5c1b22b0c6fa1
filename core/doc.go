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
// Time is integer microseconds and every comparison is integer arithmetic,
// never a float division: the sliding window compares products, the token
// bucket counts tokens × P so that a refill of Q/P per µs is Q per µs, and
// GCRA keeps TAT as whole ticks plus a remainder over Q. Post-hoc debt
// saturates at DebtFactor × capacity.
//
// Decisions are exact when Capacity × Period is at most 2^47µs. Beyond,
// SlidingWindow, TokenBucket, GCRA and LeakyBucket count time in ticks of
// 10^k µs (10µs … 1s), rounded so that no decision is more permissive than
// exact arithmetic: a call counts time up to the tick boundary before it,
// which can make it more conservative by the refill of one tick (or, for
// SlidingWindow, the previous window's weight over one tick), and a charge
// never gains the refill between that boundary and now (rounding leaves a
// bucket short of exact by less than 1/(Period in ticks) of a token).
//
// The ticks, the debt cap and Validate's bounds (MaxQuota, MaxPeriod) keep
// the numbers the Redis store's Lua computes with, IEEE doubles, within
// 2^53, where they are exact integers too. The only values that can pass
// it are then clamped to a bound within it, or compared with one far below
// them (a sliding window's weighted usage, with Q·P ≤ 2^47): rounding
// cannot change the outcome. Limit.Validate rejects limits whose Capacity ×
// Period no tick that divides Period (up to 1s) brings within 2^47.
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
