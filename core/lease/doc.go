// Package lease puts a shared store (the Redis store: one instance,
// Sentinel or Cluster) behind local allowances, so that most decisions on a
// shared limit are made in process, at memory speed, without ever admitting
// more than the shared store would:
//
//	shared := redisstore.New(rdb)
//	store, err := lease.New(shared)
//	lim, err := core.New(store, core.PerSecond(5000))
//
// Every adapter works unchanged: the Store is a core.Store.
//
// # Model
//
// Per plan and key, an instance holds an allowance. It reserves a slice of
// the key's quota with one Take of n units on the shared store — all the
// key's limits at once, through the store's own atomic operation, one round
// trip — then admits Takes for that key in process while the slice lasts
// and its lease holds, and gives back what it did not spend (a Refund) when
// the lease ends, on eviction and on Close, where that is safe (below).
//
// The guarantee, for every algorithm that leases: every request admitted
// through a lease was charged to the shared state before it was admitted,
// within the window it is admitted in. A fleet of any number of instances
// therefore never admits more than the shared store would have admitted had
// each reservation been a burst of requests at its instant — and, stronger,
// replayed one by one at the instants the fleet admitted them, every
// admission passes one exact store (the fleet simulator, package
// leasetest, checks exactly that, on a memstore and on a real Redis). The
// rules below keep it.
//
// Let Q = quota, P = period, B = capacity, r = Q/P, a reservation of n
// units made at instant s (the shared store's time of the Take), and t ≥ s
// the instant a held unit is spent.
//
// FixedWindow. The charge is counted in window w = ⌊s/P⌋ only. Admitted at
// t in w, the unit is a request the single store would have counted in w
// as well; the window's count is count_w = (admitted in w) + (held from w)
// ≤ Q, the shared store's own check. Admitted after w ends it would count
// in a window that never saw it. So the lease ends at (w+1)·P = s + Reset
// (Reset, after a charge, is the time to the window's end).
//
// SlidingWindow. The charge sits in cur of window w; the decision is
// prev·(P−e) + cur·P ≤ Q·P. Spent at t in w, the single store would add
// it to cur of w too: same state. Spent at t in w+1, the single store
// would add it to cur of w+1, where it weighs P, while the shared state
// has it in prev, where it weighs P − e < P: the shared store would admit
// e/P of a unit too much for every unit so spent. So the lease ends at
// the window boundary (w+1)·P = s + Reset − P (Reset, after a charge, is
// the end of the window after the charge's, when cur stops counting).
//
// BucketedWindow. A charge in bucket b = ⌊s/p⌋ counts until b leaves the
// window, at (b + P/p)·p. A unit spent at t in bucket b' > b would, in the
// single store, count until (b' + P/p)·p, later: between the two instants
// the shared store sees room the single store does not. Spent within b,
// both count it in b. So the lease ends at the bucket's end, (b+1)·p =
// s + Reset − P + p.
//
// TokenBucket and GCRA (one refill arithmetic: GCRA's TAT is a token
// bucket's level read backwards). Let S(t) be the shared level (tokens),
// H(t) the units held by the fleet, and T(t) the level of the single
// store fed the admissions at their instants. A reservation moves n from
// S to H; a local admission takes c from H and from T; both levels refill
// at r, capped at B. Spending later than the reservation is never more
// permissive by itself — the shared level has only refilled since, by
// r·(t − s) — but the cap can make it so: while S + H > B the single
// store, full, wastes refill that the shared store, holding H aside,
// credits. So a lease must end before S + H can reach B. With X the
// level before a reservation that holds h of its n units, the shared
// level thereafter is at most X − n + r·(t − s) (no give-back raises it),
// which stays below B − h while
//
//	t − s < (B − X + n − h)/r = Reset − h/r
//
// (Reset, after the Take, is (B − X + n)/r). So the lease ends at
// s + Reset − ⌈h·P/Q⌉ − 2 ticks (the ticks pay for the rounding up of
// both terms). For a fleet: order the holders by reservation, j1 first;
// each later reservation lowered S by its n before the one after it, so
// S(t) ≤ X₁ − Σn + r·(t − s₁) < B − Σh while the first lease holds, and
// G = S + H ≤ B throughout; by induction T ≥ G, and every local
// admission passes the single store. That argument needs S to rise only
// by refill, so units held under these algorithms are never given back:
// at the lease's end, on eviction and on Close they expire (the bucket
// refills them at r anyway). A full bucket (X = B) gets no lease at all;
// so a reservation on a plan of one limit may burn u = ⌈r·(L − span)⌉
// units beyond the slice (Stats.Burned), which lengthens its lease to
// L, the renew interval: in steady state a leased bucket runs r·L below
// full, the price of deciding it in process.
//
// SlidingLog, LeakyBucket and Concurrency cannot keep the guarantee: a
// log's entries carry their own instants (a unit charged at s expires at
// s + P, not at t + P), a LeakyBucket's delay is the queue at the instant
// of the request, and a unit in flight is held by one request and
// released by it. Plans with any of these limits pass through whole,
// decided per request as without leases.
//
// Give-backs. A refund into a window other than the charge's would create
// room that window never had. So a lot (the unspent part of one
// reservation) of a window algorithm is given back by a Refund carrying
// the reservation's receipt (engine.Receipt, from the Result's At): the
// shared store returns the units to the charge's window or bucket, or, once
// that has passed, to nothing; a sliding window's units still weigh while
// the charge's window is the previous one, and come off it. (With a shared
// store that reports no At, a lot stops being spent half of MinLease
// before its window ends, and is given back by a plain Refund bounded by
// a context deadline at the window's end: the Redis store refuses work
// past its caller's deadline, converted to the server's clock never
// later, so the refund lands in the charge's window or not at all.) A
// Reset drops the allowance without a give-back (the Reset replenishes
// the key), and units reserved before it expire.
//
// Times. Leases are timed by durations the shared store reports (Reset,
// Retry), measured from the local instant the reservation was sent, which
// precedes the store's instant: a lease ends no later, in the store's
// clock, than its rule says, whatever the offset between the clocks.
//
// # Slices
//
// Each allowance measures its key's demand at this instance: the units
// asked (admitted or not) between reservations, averaged exponentially
// over about four renew intervals. A reservation asks for the demand of
// one renew interval (WithRenewInterval) or of four round trips, whichever
// is longer (a round trip measured from the reservation's sending to its
// answer being acted on: scheduling in a loaded process included), or of
// the lease when it is shorter, plus the units of callers waiting for it
// (WithMinSlice sets a floor), capped by WithShare
// of the remaining units the shared store reported at the last
// reservation, and by the capacity. Instances asking more renew more
// often and hold more: a proportional share of the quota, as in Doorman.
// As the quota runs out, share × remaining drops below one unit and
// every request goes to the shared store on its own, so the last units
// go to whoever asks first, not to whoever reserved early.
//
// A key gets an allowance once it is asked about twice within a renew
// interval (or at once, with WithMinSlice), or once the shared store
// denies it (so that the denial is remembered); until then its Takes go
// to the shared store as they would without leases. Cold keys (one
// request per client per second or minute, most keys of a large key
// space) thus cost what they cost without leases, one round trip, plus a
// hash and one word of a fixed table (recent.go), with no allowance, lock
// or give-back. An allowance's first reservation goes alone too (nothing
// is known of the key's demand or of the shared remaining before it).
//
// A slice is renewed off the request path, by a background Take, once
// half of it is spent (or, for a lease that ends by time, two round trips
// before it ends); at most one reservation ahead per key is in flight,
// and callers that need units while it is wait for it rather than making
// their own (Stats.Waits counts the Takes that waited on a round trip).
// While it is in flight, one local decision in 32 yields the processor
// (runtime.Gosched): callers that never block would otherwise delay the
// goroutine that reads its answer.
//
// A Take the front lot covers is decided without a lock or an allocation:
// an atomic decrement of the lot's units, checked against its end. A
// core.Limiter asks for it through the Store's ApplyLocal before the
// timeout and the circuit breaker of a remote call (see core.Store).
//
// A refused reservation is retried at once for the request alone; refused
// again, the key is denied in process, with the shared store's Result,
// until its Retry (at most MaxLease), for Takes of at least that cost, as
// core's deny cache does. A denial differs from the shared store's answer
// only when the key's state changes otherwise than by time before Retry
// (a give-back or Refund by another instance).
//
// # Results
//
// A Take decided in process reports the shared Result of the last
// reservation, its times (Reset, Window) less the time since, with the
// units held counted as remaining: for a lone instance, Remaining is
// exact. It differs from the truth by what other instances did since: it
// counts their held units as used (under by at most the fleet's unspent
// slices) and does not see their spending since the reservation (over by
// at most what they admitted since). Times are exact for the window
// algorithms: their Reset is a window's or bucket's end, fixed by the
// reservation's own charge, and the lease ends by then. For TokenBucket
// and GCRA, Reset (the time until full) is early by the units other
// instances reserved since, over the rate, and late by those they gave
// back since: within MaxLease, what the shared store granted or took back
// from them in that time, over the rate.
// Peek, Charge and Refund pass through, their Results counting the units
// held as remaining.
//
// # Faults
//
// While the shared store fails, an instance admits what it holds, then
// returns the store's error for each Take it cannot cover (the Limiter's
// failure policy then applies). A crashed instance strands at most its
// unspent slices until their leases end: at most MaxLease, and at most
// the window of a window algorithm. A Reset, Refund or rule change made
// through another instance is not seen by this one's slices until their
// leases end.
//
// Memory is bounded by WithMaxKeys: a new key past it evicts one holding
// no units if a sample finds one, else the least recently used sampled
// key, whose units are given back (under the rules above) or expire —
// never kept, never invented.
package lease
