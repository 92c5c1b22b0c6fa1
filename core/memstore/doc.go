// Package memstore is Tollgate's in-memory store, the embedded default: no
// server to run, state per process.
//
// Keys live in a power-of-two number of shards, each a map behind its own
// mutex, chosen by a hash seeded per store (so that an attacker cannot aim
// keys at one shard). Every operation runs core.Step under the shard lock,
// so a decision over several limits is atomic. The hot path — an existing
// key — allocates nothing.
//
// Memory is bounded three ways. Each key expires when all its limits are
// fully replenished (its state then equals a fresh one, so forgetting it
// changes no decision); a background sweeper removes expired keys, and Close
// stops it. WithMaxKeys bounds the number of keys: a new key arriving at a
// full shard evicts, among a few sampled keys, the one closest to expiry.
// Keys longer than WithMaxKeyLen bytes are stored under their SHA-256
// digest, in a namespace that no shorter key can name.
package memstore
