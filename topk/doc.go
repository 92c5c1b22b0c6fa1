// Package topk tells operators who is being limited: a bounded top-K of
// the most denied keys, with a stated error bound, in memory that no flood
// of distinct keys can grow.
//
// # The sketch and its bound
//
// A Tracker counts denials per key in a Space-Saving sketch (Metwally,
// Agrawal and El Abbadi, "Efficient Computation of Frequent and Top-k
// Elements in Data Streams", 2005) of m counters (WithCapacity, default
// 1024). A key with a counter adds to it; a new key, once all m counters
// are taken, takes the counter of the smallest count c, counting from c,
// with an error of c. Over a period in which N denials were counted:
//
//   - every key denied more than N/m times is in the sketch;
//   - each count is an upper bound of the key's true count, at most N/m
//     too high (Entry.Error says how much each may be; often 0);
//   - a key not in the sketch was denied at most N/m times.
//
// With the default m = 1024: every key behind more than 1/1024 (about
// 0.1%) of the denials is found, and after 1,000,000 denials no count is
// more than 976 too high. Snapshot.Bound is the bound actually reached,
// usually well below N/m, and 0 (every count exact) until more than m
// distinct keys are denied in a window. With WithCostWeight a denial
// counts its cost, and N and the bounds are in cost units.
//
// # Cost
//
// A denial takes the tracker's lock for a map lookup and a sift in a heap
// of m counters, O(log m), and allocates nothing for a key that has a
// counter; a key that takes a counter allocates its copy. Once per window
// the first denial also clears the oldest window's counters, O(m). Keys
// longer than WithMaxKeyLen (default 128 bytes) are counted under their
// SHA-256 digest, in a namespace no shorter key can name. Memory is
// bounded by m whatever the keys: about 100 bytes per counter plus its
// key, for two windows of m counters, so under 0.5 MB at the defaults.
//
// # Windows
//
// A long-running server's operator asks who is limited now, not since the
// process started: all-time counts keep yesterday's offender on top, and
// as N grows so does the bound N/m, until today's offender hides beneath
// it. So a Tracker counts in tumbling windows (WithWindow, default 5
// minutes), and Top merges the current window with the previous one: it
// covers the last 5 to 10 minutes, and is never empty just because a
// window began. The merged bound is the sum of the windows' bounds, still
// at most N/m for the N of both. Windows, rather than an exponential
// decay, keep counts whole and the bound exact, and cost nothing between
// rotations; WithWindow(0) counts from New or the last Reset.
//
// # Feeding it
//
// OnDenied(t) is a hook for guard.WithOnDenied, which every adapter
// accepts:
//
//	t, err := topk.New()
//	...
//	r.Use(ginlimit.New(lim, guard.WithOnDenied(topk.OnDenied(t))))
//
// Anything else that sees denials (an observer) calls t.Denied(key, cost).
//
// # Reading it
//
// Top and Snapshot return the keys with their counts and errors. NewHandler
// serves a snapshot as JSON, for an operator's endpoint. Keys are often
// client IPs, user IDs or API keys, so the Handler shows them hashed by
// default (HMAC-SHA256 with a random secret per Handler): an endpoint
// exposed by mistake leaks no key, and IDs stay stable while the process
// runs. WithHashSecret shares IDs across instances and restarts, and lets
// whoever holds the secret find a key's ID (Handler.KeyID); WithRawKeys
// shows keys as they are, for endpoints only operators can reach.
package topk
