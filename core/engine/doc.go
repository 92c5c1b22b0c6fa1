// Package engine is what Tollgate's stores share: the algorithms as one
// pure step function, the state they keep per limit, and the operations
// stores apply. Users of Tollgate never import it; store authors do (the
// memstore and redisstore packages, and the storetest suite that holds
// every store to Step).
//
// # Model
//
// A core.Limiter compiles its limits once (Compile) into a Plan: the scope
// its keys live in and the limits in integer units. Each operation is an
// Op, small and passed by value: the plan, the key, the kind (Take, Peek,
// Charge, Refund, Reset), the cost and, optionally, the time. A store keeps
// one State per limit of a key and applies an Op with Step (or a port of
// it: the Redis store's Lua), atomically over all the key's limits, and
// returns a Result: the verdict and the binding limit's numbers, with each
// limit's part when there are several.
//
// Step is a pure function of (op, now, states): every store decides the
// same way. Time is integer microseconds and the arithmetic is integer,
// every stored value and result below 2^53 so that a port computing in
// doubles is bit-identical, and every decision exact, to the µs. Limits
// whose Capacity × Period passes 2^47 µs (Limit.Wide) have products past
// 2^53: Step computes them in 128 bits, and a port needs an exact routine
// for them (the Redis store's Lua has one, on that path only). Such limits
// once computed in a coarser time unit (Limit.Tick, gone): their states,
// of another Ident, start afresh once.
//
// # Algorithms
//
// With Q = Quota, P = Period, B = Capacity (Burst, default Q), c = cost and
// t = now (core.Algorithm documents each):
//
//	FixedWindow     count + c ≤ Q, windows ⌊t/P⌋ aligned to the epoch
//	SlidingWindow   prev·(P−e) + (cur+c)·P ≤ Q·P, e = time into the window
//	SlidingLog      Σ cost of entries younger than P, + c ≤ Q
//	BucketedWindow  Σ counts of the last P/p buckets of size p, + c ≤ Q
//	TokenBucket     min(B, tokens + (t−last)·Q/P) ≥ c
//	GCRA            max(TAT, t) + c·T − B·T ≤ t, T = P/Q
//	LeakyBucket     GCRA's condition; served after Delay = max(TAT−t, 0)
//
// State documents the registers each algorithm keeps.
package engine
