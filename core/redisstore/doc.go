// Package redisstore is a core.Store in Redis or Redis Cluster, so that a
// fleet of instances shares one quota per key.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379",
//		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
//	store, err := redisstore.New(rdb)
//	lim, err := core.New(store, core.PerMinute(100), core.PerHour(1000),
//		core.WithFailurePolicy(core.Fallback(memstore.New(), core.FleetSize(4))))
//
// Of the client options: ContextTimeoutEnabled makes a caller's deadline
// bound the socket reads; MaxRetries: -1 and DialerRetries: 1 stop go-redis
// from retrying a dial to a Redis that refuses connections (by default it
// retries for over a second, longer than any caller waits, so that a dead
// Redis looks like a hanging one and the Limiter's circuit breaker opens
// only after three timeouts, not at the first refusal). The store never
// lets go-redis resend a state-changing command anyway (see Resends).
//
// New warms the client up (WithWarmup): it dials connections to each node
// and loads the script there, waiting at most a second and never failing
// on a Redis that is down, so that the first decisions on a healthy Redis
// neither wait for a dial nor send the script's text inside their
// deadlines. To quiet go-redis's own log lines (a line per failed dial
// while Redis is down), call once at startup:
//
//	redis.SetLogger(redisstore.GoRedisLogger(slog.Default()))
//
// # Model
//
// Every Apply is one Lua script, run with EVALSHA and with EVAL when the
// server has lost it (a restart, SCRIPT FLUSH): one round trip and one
// atomic step whatever the number of limits, so several limits of mixed
// algorithms are decided all or nothing, and no two decisions on a key
// interleave, whichever process makes them. The script
// is a port of engine.Step: the limits' numbers come from engine.Compile
// (the same time unit, capacity and layout identity as Step's), states are
// the same core.State values, and all arithmetic is on integers within
// 2^53, where Lua's doubles are exact (divisions are corrected for
// rounding; sums that could pass 2^53 are reordered, and the few values that
// still may are clamped to a bound within it or compared with one far below
// them, which rounding cannot change). The storetest suite and a
// differential test against memstore hold its decisions equal to Step's,
// field by field. Invalid operations are rejected in Go, before any I/O,
// with core's errors.
//
// The commonest operation, a Take or a Peek over limits without logs on a
// key that holds their state, takes the script's fast path: it decides,
// writes, and replies with the time it used, its verdict and the states it
// read; the client computes the Decision from them with engine.Step and fails
// the call (ErrReply) should the script's verdict ever differ. For each
// set of up to 8 limits without logs (up to 64 sets per Store), the store
// runs a copy of the script specialized to them: the fast path written out
// with the limits' numbers as literals, which halves the server's time per
// limit. Each such copy is one more script in the server's cache (15 KB of
// text for one limit to 22 KB for eight); processes with the same limits
// and margin share it. Both kinds come from one source, apply.lua.tmpl (a
// text/template, rendered in fastpath.go), where the specialized fast path
// stands beside the generic one it writes out.
//
// # Keys
//
// With the prefix p (WithPrefix, default "tollgate:"), a user key k and a
// scope (engine.Plan.Scope, a Limiter's name):
//
//	p{t}               the states of k: a 32-byte record per limit layout
//	                   (engine.Limit.Ident), at most 16, last operation's first,
//	                   then up to 16 receipts of calls sent inline (below)
//	p{t}:<ident>:<n>   the log of a SlidingLog or BucketedWindow limit: a list
//	p{t}:op:<id>       with WithOpTTL, the reply of a state-changing operation (below)
//
// State is kept per key and limit layout, as memstore keeps it: Limiters
// with different limits sharing a key (an app-wide limit and a route's, both
// per client IP) each find their own state, and a changed Quota or Burst
// keeps its state (its meaning under the new numbers: engine.Limit.Ident)
// while a changed Algorithm, Period or Precision starts afresh. t is k
// with '\', '{' and '}' escaped ("\\", "\(", "\)"), or "\#" and the hex
// SHA-256 of k when k is longer than WithMaxKeyLen (256 bytes by
// default), preceded by the escaped scope and "\:" when the scope is not
// empty. t never holds a brace, so Redis Cluster hashes every key of a
// decision on t: they share a slot and a script never sees CROSSSLOT,
// whatever bytes k holds. Distinct scopes and keys give distinct t.
//
// # Expiry
//
// Every key carries a TTL of at least the time until its limits are fully
// replenished (as the decision's ResetAfter reports it), rounded up to
// milliseconds, plus a margin (WithMargin, default 1s), or until the
// receipts it holds expire (1.2s past their calls' deadlines), whichever
// is later; and of at most one margin more. On Redis 7 or later, a Take
// or Peek of one set of limits without logs (the fast path) that finds
// the key's TTL within those bounds keeps it, and sets it to the upper
// one otherwise: checking a TTL costs the server less than setting one,
// and the writes of a busy key then set it about once a margin. Other
// writes, and every write on Redis 5 and 6, set the lower one. A key whose
// every limit is fully replenished and which holds no receipt is deleted
// at once, as memstore does; a Peek or a denied request writes only what
// the passing of time changed. So no key outlives its last use by more
// than its longest limit's replenishment plus twice the margin, or its
// last call's deadline, 1.2s and the margin; operation records live until
// the call's deadline and 200 ms more, at most WithOpTTL.
//
// # Time
//
// By default the script reads the server's TIME, so every instance of a
// fleet decides on one clock. When the operation carries a time (engine.Op.Now, set
// by core.WithClock), the script uses it instead: tests drive a fake clock
// this way. Expiry always runs on the server's clock, so a caller's clock
// must stay within the margin of the server's, and times must lie within
// 2^53µs (285 years) of 1970, where doubles are exact. The script needs
// Redis 5 or later, which replicates a script's effects (a script reading
// TIME may then write); it is tested on Redis 7.
//
// # Resends: applied at most once, or exactly once with WithOpTTL
//
// go-redis sends a command again when its first send failed in a way that
// leaves unknown whether the server ran it: the connection closed before
// the reply came, or (without a deadline, or with a ReadTimeout shorter
// than the deadline) the reply timed out. Sent again, a Take, Charge,
// Refund or Reset would be applied twice.
//
// By default the store never lets that happen, at no cost to the server:
// go-redis encodes a command's arguments each time it writes it, and one
// argument of each state-changing operation refuses a second encoding.
// The resend then fails with ErrResent (which go-redis does not retry),
// the operation is applied at most once, and the Limiter treats the error
// like a timeout: its failure policy answers, as it answers any call whose
// reply is lost. A resend after the server refused a command unrun
// (NOSCRIPT, which the store handles itself) is allowed. Peeks change
// nothing and are resent freely. The price: go-redis's own recovery from a
// dropped connection, or from a redirect or LOADING/READONLY reply during a
// cluster resharding or a failover, becomes a failure-policy decision for
// the operations caught in it.
//
// WithOpTTL makes resends exactly-once instead: each state-changing
// operation carries an operation id, unique per store (a random base and a
// counter); the script records its reply under p{t}:op:<id> and, run again
// with the same id, returns that reply without charging again. Peeks and
// denied Takes record nothing. A record lives until the call's deadline and
// 200 ms more (go-redis sends no copy of a command once its context is
// done), at most the WithOpTTL duration, which alone bounds it for calls
// without a deadline and should then exceed the client's retry window. A
// copy that reaches the server after the record expired (the server
// stalled longer than that) is charged again. Records cost the server a key
// per state-changing decision: at 64 concurrent callers about a quarter of
// the throughput (BENCHMARKS.md).
//
// # Timeouts and deadlines
//
// Apply returns by its context's deadline, and ApplyBy by the earlier of
// that and its own, whatever Redis does; the Limiter then answers with its
// failure policy, as if the operation had not happened. (core.Limiter
// passes its per-call timeout to ApplyBy: a context with a timer made for
// every call cost a tenth of the client's CPU at 64 callers; the callers
// of a batching worker's calls share one timer, set for the earliest of
// their deadlines, where a timer per call cost about 6% more.) A call sent
// by a store's goroutine (a batching worker, or one per call with batching
// off) returns as soon as its context ends or its deadline passes, and the
// command goes on without the caller; a call sent inline (see Batching)
// reads its own reply, under a context that carries the deadline, and sees
// a cancellation only when the reply comes or the deadline passes. Either
// way the store makes sure the operation did not happen:
//
//   - The script carries the caller's deadline, converted to the server's
//     clock, and changes nothing when it runs past it (it replies EXPIRED,
//     ErrExpired). A command that waited out a stall of Redis in its socket
//     is refused when Redis resumes. The server's clock is learned from
//     every reply, which carries the server's TIME: the store keeps a lower
//     bound of the offset between the clocks, so that the converted
//     deadline falls no later than the caller's own (see deadline.go).
//     That bound is lowered for drift while no reply comes; after a pause
//     long enough that it would cut a quarter of a call's time left (25 s
//     for the Limiter's 100 ms), the store first asks the server's TIME,
//     one round trip, rather than have the script refuse the call.
//   - A script that ran before the deadline may reply after it. The store
//     still reads the reply, up to one second past the deadline, and undoes
//     what the operation did with the opposite one: a refund for an
//     admitted Take or a Charge, a charge for a Refund (a Reset cannot be
//     undone). The refund carries the reply's receipt (engine.Receipt):
//     it goes back to the window, bucket or log entry the operation
//     charged, never into a later window, so an undo that runs after a
//     window's end makes no room in the new one; for GCRA, TokenBucket and
//     LeakyBucket it gives back what the bucket has not refilled since
//     (all of it, when nothing came between).
//   - A call sent inline loses such a reply with its connection. Its
//     operation leaves a receipt in the key when it changes usage (the
//     call's lane and number, for up to 1.2s past the deadline); once the
//     deadline has passed in the server's clock, the store looks for the
//     receipt and, found, undoes the operation as above. Its reply lost,
//     the store knows only that the operation ran between the send and the
//     deadline: the refund goes to the oldest window, bucket or log entry
//     of that span (never more permissive; nothing when the span crosses
//     out of the current window's reach). With WithOpTTL it sends the
//     operation again instead, and its record replies, time included.
//
// So the key's state is what the answered decisions say, unless a reply
// is delayed more than a second past its caller's deadline after its
// script ran (it is then lost with its connection), a call sent inline
// whose reply was lost cannot look for its receipt within a second past
// its deadline, or the store has not yet seen a reply (its first calls
// carry no deadline, are never sent inline, and rely on the undoing alone).
//
// A key holds the live receipts of at most 16 lanes (a lane is a Store's
// queue for one node, and its new receipt in a key replaces its old one).
// While 16 other lanes' receipts are live in a key, up to 1.2s past their
// calls' deadlines, a call of another lane sent inline that may leave one
// (a Take, a Charge, a Refund) changes nothing: the script refuses it
// unrun, and the store sends it again as a call that is not inline (see
// Batching), without a receipt. It is decided once, for one round trip
// more.
//
// # Cluster, Ring, Sentinel
//
// Client is satisfied by *redis.Client, *redis.ClusterClient, *redis.Ring
// and the client of redis.NewFailoverClient. Each decision touches one hash
// slot, so it runs on the master owning the key; the script is loaded on
// each node the first time it runs there.
//
// On a Cluster the store sends each operation to its master itself, in
// pipelines of that master's operations only, and names the master holding
// a key to the Limiter (Part, core.Partitioned), which keeps a circuit
// breaker per master: a master that fails costs only the keys it owns.
// After a transport failure on a master the store has go-redis reload the
// cluster's topology every 250 ms while failures go on, so that a promoted
// replica takes its keys over within a quarter second (go-redis alone
// waits for a MOVED, which a dead node never sends, or for its minute-long
// reload interval). A reply that proves the script did not run (MOVED,
// ASK, TRYAGAIN, CLUSTERDOWN, LOADING, READONLY, MASTERDOWN, NOREPLICAS,
// BUSY, NOSCRIPT) is sent again, where the cluster client's redirects lead
// it.
//
// Sentinel's failover client and a Ring are one part: the whole store
// fails over together, and the Limiter's breaker probes it every 250 ms.
//
// # Replication
//
// Redis replicates asynchronously: a master that dies takes with it the
// changes it acknowledged but had not yet sent to its replicas, and the
// replica promoted in its place has not seen them: those admissions are
// made again. On loopback, where replicas lag by well under a millisecond,
// the failover tests lose none or one; with a replica half a second behind
// under load, a failover lost 3,547 admissions of 670 keys (every key was
// admitted again up to its quota). WithWait makes each state-changing
// operation wait for replicas' acknowledgements in the same round trip, so
// that none an answer was given for is lost, for a price measured in
// BENCHMARKS.md. See the README ("Redis in production") for the server
// settings that bound the loss otherwise.
//
// # Batching
//
// A call that finds nothing else in flight on its node's lane is sent
// inline: by its caller, in its own goroutine, under its own context. A
// hand-off to another goroutine and back costs a lone caller about half a
// loopback round trip (two goroutine wake-ups), and a lone caller has
// nothing to share a pipeline with. Only calls that queue behind one in
// flight go to the workers below. A call is sent inline when its context
// has a deadline, the client bounds reads by it (ContextTimeoutEnabled,
// and read and write timeouts other than -2), the store has learned the
// server's clock (from its first reply), its limits include no Concurrency
// limit and it is not a Release; a lone caller's first call goes to a
// worker.
//
// WithBatching coalesces concurrent Applies into pipelines: a few worker
// goroutines each take every operation waiting (up to a size) and send them
// in one pipeline, without waiting for more to arrive. Under many
// concurrent callers this divides the system calls and round trips per
// decision (see BENCHMARKS.md). On a single Redis or a Sentinel's master
// (a *redis.Client), a worker sends the operations of one script in its
// pipeline as one EVALSHA of the script's twin, which runs the script once
// per operation and replies with an array of their replies: the server
// reads, looks up and answers one command, sets up one Lua call and reads
// TIME once for them all, and every operation of that command decides at
// that one instant. An operation whose script fails there gets its own
// error, as its own command would have, and the others go on; but a node
// that refuses every write (a replica: READONLY) fails the whole command,
// reads included (multi.go).
// A Cluster's or a Ring's batches send one EVALSHA per operation, as their
// keys may live on different nodes; so does WithCombinedScripts(false),
// for a proxy in front of several servers. A caller whose context ends while its
// operation waits for a worker is answered at once, and its operation is
// never sent. Batching is on by default (Close stops its workers);
// WithBatching(0, 0) turns it off: each operation that is not sent inline
// is then sent from a goroutine of its own. Workers wait for late replies
// (see Timeouts and deadlines), so a Redis that hangs holds a worker for
// up to a second past its callers' deadlines.
//
// # Logs and observers
//
// A caller that gives up at its deadline sees only that; the cause shows
// later, or elsewhere: in a dial that go-redis retries (a refused
// connection), or in a reply its worker reads after the caller left. The
// store reports those (core.EventStoreFailure) to its observers
// (WithObserver) and logs them through log/slog (slog.Default() unless
// WithLogger says otherwise), at most about a line a second per cause with
// a count of the rest: "dial tcp 10.0.0.7:6379: connect: connection
// refused" where the Limiter logged "context deadline exceeded". To see
// dials, New adds a hook (redis.Hook, observing only) to a *redis.Client
// or failover client, and to each Cluster master's client the store sends
// to; it reports nothing once the store is closed. go-redis cannot remove
// a hook, so each store made on a client leaves a small one behind, which
// holds the store weakly: a closed store is collected even while its
// client lives on. Observers also see
// script loads, redirects, topology reloads and compensations, which the
// log shows at debug level (failed undos as warnings).
package redisstore
