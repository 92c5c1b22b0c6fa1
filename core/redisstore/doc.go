// Package redisstore is a core.Store in Redis or Redis Cluster, so that a
// fleet of instances shares one quota per key.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.New(rdb)
//	lim, err := core.New(store, core.PerMinute(100), core.PerHour(1000),
//		core.WithFailurePolicy(core.Fallback(memstore.New())))
//
// # Model
//
// Every Apply is one Lua script (apply.lua, embedded), run with EVALSHA and
// with EVAL when the server has lost it (a restart, SCRIPT FLUSH): one
// round trip and one atomic step whatever the number of limits, so several
// limits of mixed algorithms are decided all or nothing, and no two
// decisions on a key interleave, whichever process makes them. The script
// is a port of core.Step: the limits' numbers come from core.Limit.Params
// (the same time unit, capacity and layout identity as Step's), states are
// the same core.State values, and all arithmetic is on integers below 2^53,
// where Lua's doubles are exact (divisions are corrected for rounding;
// sums that could pass 2^53 are reordered). The storetest suite and a
// differential test against memstore hold its decisions equal to Step's,
// field by field. Invalid operations are rejected in Go, before any I/O,
// with core's errors.
//
// # Keys
//
// With the prefix p (WithPrefix, default "tollgate:"), a user key k and a
// scope (core.Op.Scope, a Limiter's name):
//
//	p{t}               the states of k: a 32-byte record per limit layout
//	                   (core.Params.Ident), at most 16, last operation's first
//	p{t}:<ident>:<n>   the log of a SlidingLog or BucketedWindow limit: a list
//	p{t}:op:<id>       the reply of a state-changing operation, for retries (below)
//
// State is kept per key and limit layout, as memstore keeps it: Limiters
// with different limits sharing a key (an app-wide limit and a route's, both
// per client IP) each find their own state, and a changed Quota or Burst
// keeps its usage while a changed Algorithm, Period or Precision starts
// afresh. t is k with '\', '{' and '}' escaped ("\\", "\(", "\)"), or "\#"
// and the hex SHA-256 of k when k is longer than WithMaxKeyLen (256 bytes by
// default), preceded by the escaped scope and "\:" when the scope is not
// empty. t never holds a brace, so Redis Cluster hashes every key of a
// decision on t: they share a slot and a script never sees CROSSSLOT,
// whatever bytes k holds. Distinct scopes and keys give distinct t.
//
// # Expiry
//
// Every key carries a TTL: the time until its limits are fully replenished
// (as the decision's ResetAfter reports it), rounded up to milliseconds,
// plus a margin (WithMargin, default 1s). A key whose every limit is fully
// replenished is deleted at once, as memstore does; a Peek or a denied
// request writes only what the passing of time changed. So no key outlives
// its last use by more than its longest limit's replenishment plus the
// margin, and operation records by WithOpTTL.
//
// # Time
//
// By default the script reads the server's TIME, so every instance of a
// fleet decides on one clock. When the operation carries a time (Op.Now, set
// by core.WithClock), the script uses it instead: tests drive a fake clock
// this way. Expiry always runs on the server's clock, so a caller's clock
// must stay within the margin of the server's, and times must lie within
// 2^53µs (285 years) of 1970, where doubles are exact. The script needs
// Redis 5 or later, which replicates a script's effects (a script reading
// TIME may then write); it is tested on Redis 7.
//
// # Retries and idempotency
//
// go-redis retries a command that timed out while reading its reply (up to
// MaxRetries times), yet the server may have run it: without care, one
// AllowN would be charged twice. Each Take, Charge, Refund and Reset
// therefore carries an operation id, unique per store (a random base and a
// counter); the script records its reply under p{t}:op:<id> for WithOpTTL
// (default 5s) and, run again with the same id, returns that reply without
// charging again. Peeks and denied Takes change nothing and record
// nothing. Set WithOpTTL above the client's retry window (with
// ContextTimeoutEnabled and a deadline, the deadline; otherwise about
// MaxRetries × (ReadTimeout + MaxRetryBackoff)); WithOpTTL(0) saves the
// records' memory (about 100 bytes per state-changing decision for the TTL)
// and accepts double charges on retries. A retry that reaches the server
// after the record expired is charged again.
//
// # Timeouts
//
// Apply honours its context's deadline when the client has
// ContextTimeoutEnabled (recommended: core.Limiter's per-call timeout relies
// on it), or always when batching is on. Without either, a call to a server
// that hangs waits for the client's ReadTimeout.
//
// # Cluster, Ring, Sentinel
//
// Client is satisfied by *redis.Client, *redis.ClusterClient, *redis.Ring
// and the client of redis.NewFailoverClient. Each decision touches one hash
// slot, so it runs on the master owning the key; the script is loaded on
// each node the first time it runs there.
//
// # Batching
//
// WithBatching coalesces concurrent Applies into pipelines: a few worker
// goroutines each take every operation waiting (up to a size) and send them
// in one pipeline, without waiting for more to arrive. Under many
// concurrent callers this divides the system calls and round trips per
// decision (see BENCHMARKS.md); a lone caller pays a channel hand-off. A
// caller whose context ends while its operation waits for a worker is
// answered at once, and its operation is never sent. Batching is off by
// default.
package redisstore
