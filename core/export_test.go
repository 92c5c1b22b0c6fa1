package core

import "github.com/tollgate/tollgate/core/engine"

// DenyCacheLen returns the number of keys l's deny cache remembers.
func DenyCacheLen(l *Limiter) int { return l.deny.len() }

// Direct reports whether l's AllowN goes straight to its store.
func Direct(l *Limiter) bool { return l.direct }

// TakesInBrief reports whether l decides through its store's TakeBrief.
func TakesInBrief(l *Limiter) bool { return l.taker != nil }

// ReceiptResets returns the resets r gives a refund (engine.Receipt.Reset).
func ReceiptResets(r Receipt) []int64 { return r.engine().Reset }

// SetCharged makes d the Decision of a Take that charged its cost at
// (Unix µs), as the store's answer does.
func SetCharged(d *Decision, at int64) { d.charged(engine.Take, at) }
