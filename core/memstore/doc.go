// Package memstore is Tollgate's in-memory store, the embedded default: no
// server to run, state per process.
//
// Keys live in a power-of-two number of shards, each a hash table behind
// its own mutex, chosen by a hash seeded per store (so that an attacker
// cannot aim keys at one shard), which also finds the key in its shard's
// table. The common operation — a plan of limits without logs, on an
// existing key whose states are laid out for that plan, as every call of
// one Limiter leaves them — finds the key without the shard's lock and
// takes the key's own lock only, so that decisions on different keys
// write no memory in common. The others (a new key, a key last used by
// another plan, a log, a key that goes, an expiry brought forward) take
// the shard's lock too, first. Either way each operation is atomic, over
// all its limits. The hot path — an existing key — allocates nothing but,
// for a plan of several limits, each limit's part of the Result, and not
// that when the op brings the memory for them (engine.Op.Parts, as a
// core.Limiter does, from a pool);
// beyond four limits the engine allocates its scratch too.
//
// A key of one limit costs about 190 bytes (TestMemoryPerKey, and
// bench's BenchmarkFootprint): its entry, 128 bytes with the key's bytes
// in it for a key of up to 16 bytes (192 up to 80 bytes, a hashed long
// key's digest included; a longer key's bytes are an object of their own
// beside a 128-byte entry); its slot in the shard's table, 16 bytes in a
// table from 3/8 to 3/4 full (21 to 43 bytes a key); and its 16-byte place
// in the expiry heap.
//
// Memory is bounded three ways. Each key expires when all its limits are
// fully replenished (its state then equals a fresh one, so forgetting it
// changes no decision); a background sweeper removes expired keys, and
// Close stops it. A heap per shard, ordered by expiry, finds expired keys
// without scanning the shard.
//
// WithMaxKeys bounds the number of keys. A new key arriving at a full shard
// evicts losslessly first: expired keys go, and no key with usage is
// evicted while the shard holds one. Beyond that it evicts the key with the
// least debt (the share of its capacity still used; see core.Debt) among 8
// sampled keys. So a flood of distinct keys, each used a little, mostly
// evicts its own keys, and evicts an exhausted key only when a sample finds
// nothing but keys in full debt, none of its own. Evictions counts the keys
// evicted, LossyEvictions those that still had usage.
//
// Lossy evictions are logged through log/slog (slog.Default() unless
// WithLogger says otherwise), at most a line a second with their count.
// WithObserver reports the number of keys and the evictions, lossless and
// lossy apart, every second and at Close (see core.Observer).
//
// Keys longer than WithMaxKeyLen bytes are stored under their SHA-256
// digest, in a namespace that no shorter key can name.
package memstore
