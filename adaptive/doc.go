// Package adaptive is an adaptive concurrency limit: the most requests a
// service should have in flight at once, learned from the latency of the
// requests it serves, with no number to guess.
//
// A fixed in-flight limit (core.InFlight) protects a service only if its
// capacity was guessed right, and capacity moves: a slow dependency, a
// deploy, a noisy neighbour. A Limiter finds the limit instead: below
// capacity a request's latency is the service's own (the no-load latency);
// past it, requests queue inside the service and latency grows with the
// number in flight. The Limiter keeps the number in flight where latency
// stays within a tolerance of the no-load latency, and sheds the rest at
// once, before latency explodes.
//
//	lim, err := adaptive.New()                   // Gradient, limit 20 to start
//	h := nethttp.New(nil, nethttp.WithAdaptive(lim))(mux) // or with rate limits
//
// Every adapter (nethttp, ginlimit, echolimit, fiberlimit, grpclimit)
// takes it with guard.WithAdaptive, alone or beside rate limits: a request
// the adaptive limit sheds is charged nothing by them.
//
// # Model
//
// Acquire admits a request when the units in flight n satisfy
//
//	n < L             for Critical requests
//	n < ⌈s·L⌉         for Sheddable ones, s = WithSheddableShare (0.5)
//
// and Release ends it, with its latency (start → handler return) as a
// sample, unless the request was dropped (its client cancelled or gave
// up, its deadline passed: Dropped), which says nothing about the
// service's latency and is kept out of the signal. Both are O(1): two
// atomic operations on admission, a short critical section on release.
//
// Samples are gathered in windows of at least MinSamples samples and
// Latencies × the no-load estimate of time (WithWindow; 20 samples and 10
// latencies by default, within 1 ms to 1 s). At each window's end the
// Limiter updates the no-load latency estimate B from the window's mean
// latency m, then its Algorithm computes the next limit from the window:
//
//	B ← m                 for the first window
//	B ← B + ½·(m − B)     when m < B: fast down, over a window's mean, not
//	                      one lucky sample
//	B ← B + α·(m − B)     when m > B and the window's mean in-flight was at
//	                      most half the limit (α = 0.1): concurrency was low,
//	                      so m is a no-load latency again
//	B unchanged           otherwise: under load B never drifts upward
//
// A window that ends with fewer than MinSamples samples (at the longest
// window, under light traffic) moves B by n/MinSamples of the step: one
// lucky sample does not drag it down.
//
// No phase pins concurrency low to measure B (as Envoy's minRTT
// re-measurement does, failing requests meanwhile): B is learned from live
// traffic, and protected from ratcheting upward under sustained load (the
// failure of a windowed minimum over a fixed period, or of Vegas's and
// Gradient2's long-window averages), since a window at high concurrency
// can only lower it. A service whose no-load latency truly grows (a
// slower dependency) sees the limit fall until concurrency is low, and B
// follows from there. The limit stays within [WithMinLimit, WithMaxLimit].
//
// # Algorithms
//
// Gradient (the default) moves the limit by the gradient g = t·B/m
// (t = Tolerance, 1.5), within [½, t]:
//
//	g < 1:  L ← L − σ·(1 − g)·L         (σ = Smoothing, ½: at most −25%
//	                                      per window, a measured backoff)
//	g ≥ 1:  L ← L + min((g − 1)·L, √L)   only when the limit was binding
//	                                      (a request shed, or n reached L−1)
//	                                      and most requests were served, not
//	                                      dropped
//
// so the limit settles where the mean latency is t·B: a short queue in
// the service keeps it busy, and a request waits at most about (t−1)·B in
// it. Growth needs a binding limit and a latency within tolerance: under
// light load the limit does not climb without end (concurrency-limits
// #134); requests that time out are not samples, and a window where most
// requests timed out does not grow the limit (its few samples are the
// fastest requests), so steady timeouts never push it up (#137).
//
// AIMD is the classic alternative: L ← β·L (β = Backoff, 0.9) when the
// window's mean latency exceeds Threshold (default t·B with t = 2), else
// L ← L + 1 when the limit was binding.
//
// # Priorities
//
// A request is Critical or Sheddable (guard.WithPriority chooses, per
// request). Sheddable requests are admitted only while the units in flight
// are below ⌈s·L⌉: they are refused first, and critical ones only when the
// whole limit is in use, that is when refusing sheddable ones was not
// enough.
//
// # No queue
//
// A request that is not admitted is refused at once: the Limiter keeps no
// queue of its own. The limit it learns already lets a short queue form
// inside the service (up to (t−1)·B of waiting, by design), which is what
// keeps the service busy; a second queue in front would add its wait to
// the latency of admitted requests exactly when the point is to keep it
// low, and hold a goroutine and a connection per waiting request. A
// client told 503 with Retry-After (or gRPC Unavailable with RetryInfo)
// can retry elsewhere at once.
//
// # Time
//
// The Limiter reads time from a core.Clock (WithClock), so that a test
// drives it on a virtual clock: the algorithms' tests are deterministic
// traces.
package adaptive
