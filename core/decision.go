package core

import (
	"math"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/core/engine"
)

// Never is the RetryAfter of a cost that can never pass: one larger than the
// limit's capacity.
const Never time.Duration = math.MaxInt64

// LimitState is one limit's part of a Decision.
type LimitState struct {
	// Limit is the limit this state is about.
	Limit Limit
	// Allowed reports whether this limit alone would admit the cost.
	Allowed bool
	// Remaining is the cost units left under Limit after the operation,
	// floored, never negative.
	Remaining int64
	// ResetAfter is how long until Limit is fully replenished if nothing
	// else arrives; 0 when it already is.
	ResetAfter time.Duration
	// RetryAfter is, when this limit denies, how long until the same cost
	// could pass it (Never when the cost exceeds its capacity); else 0.
	RetryAfter time.Duration
	// Delay is, for an admitted LeakyBucket cost, its queueing delay.
	Delay time.Duration
	// EffectiveWindow is how long, from now, the key can use no more than
	// Remaining units under Limit: had it used them all at once, one more
	// unit would pass after it. It is draft-11's t (see Decision).
	EffectiveWindow time.Duration
}

// A Decision is the outcome of one operation over one key's limits.
// Being limited is not an error: it is a Decision with Allowed false.
type Decision struct {
	// Allowed reports whether the request may pass: every limit admitted its
	// cost (Take), or would (Peek). For Charge, Refund and Reset it reports
	// whether the key is within all its limits after the change.
	Allowed bool
	// Cost is the cost the operation was asked for.
	Cost int64
	// Limit is the binding limit: the one that denied with the longest
	// RetryAfter or, when allowed, the one with the least Remaining.
	Limit Limit
	// Remaining is the cost units left under Limit after the operation
	// (floored, never negative).
	Remaining int64
	// ResetAfter is how long until Limit is fully replenished if nothing
	// else arrives.
	ResetAfter time.Duration
	// RetryAfter is, when denied, how long until the same cost could pass
	// every limit if nothing else arrives; Never when it exceeds a limit's
	// capacity; 0 when allowed.
	RetryAfter time.Duration
	// Delay is, for LeakyBucket limits, how long an admitted request must
	// wait in the queue before it is served; 0 otherwise.
	Delay time.Duration
	// EffectiveWindow is how long, from now, the key can use no more than
	// Remaining units under Limit: had it used them all at once, one more
	// unit would pass after it (at the next window for a fixed window; when
	// a unit's weight has slid out, for a sliding window; when a unit has
	// refilled, for a token bucket or GCRA). It is
	// draft-ietf-httpapi-ratelimit-headers-11's effective window, t: "the
	// number of seconds within which the client can use no more than the
	// available quota". It is never more than RetryAfter for a cost of one
	// unit or more, and, unlike ResetAfter, never overstates the wait.
	EffectiveWindow time.Duration
	// Lease is, when an allowed Take acquired units on Concurrency limits,
	// the acquisition's identifier, opaque: pass it to Limiter.Release when
	// the work ends. It is 0 otherwise.
	Lease int64
	// States holds every limit's state, in the order of the limits, when the
	// operation covered more than one limit. For a single limit it is nil and
	// the Decision's own fields are that limit's state: use Each to visit the
	// states either way.
	States []LimitState
	// Source tells what made the Decision: the Limiter's store (the zero
	// value), its failure policy while the store fails, or its deny cache
	// (WithDenyCache) remembering a denial of the store.
	Source Source

	at int64 // when the store charged the cost, Unix µs; 0: it did not (see Receipt)
}

// Source tells what made a Decision.
type Source uint8

const (
	// FromStore is a Decision of the Limiter's store: the zero value.
	FromStore Source = iota
	// FromFailOpen is a Decision of the FailOpen policy, made because the
	// store failed. It admits the cost and knows no numbers: Limit is the
	// first of the key's limits, and Remaining, ResetAfter and States are
	// zero, not measured. Headers built from it must not present them as
	// the state of a limit.
	FromFailOpen
	// FromFallback is a Decision of the Fallback policy's store, made
	// because the Limiter's store failed: its numbers are the fallback
	// store's, under the limits the policy gave it (see Fallback).
	FromFallback
	// FromDenyCache is a denial of the Limiter's store remembered by its
	// deny cache (WithDenyCache), its times less the time since.
	FromDenyCache
)

var sourceNames = [...]string{FromStore: "store", FromFailOpen: "fail-open", FromFallback: "fallback", FromDenyCache: "deny-cache"}

// String returns the source's name: "store", "fail-open", "fallback" or
// "deny-cache".
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Each calls fn with every limit's state, in the order of the limits.
func (d *Decision) Each(fn func(LimitState)) {
	if d.States != nil {
		for _, s := range d.States {
			fn(s)
		}
		return
	}
	fn(LimitState{Limit: d.Limit, Allowed: d.Allowed, Remaining: d.Remaining, ResetAfter: d.ResetAfter,
		RetryAfter: d.RetryAfter, Delay: d.Delay, EffectiveWindow: d.EffectiveWindow})
}

// decision builds the Decision of an operation of cost on limits (those of
// the operation's plan, in order) from the store's Result.
func decision(limits []Limit, cost int64, res *engine.Result) Decision {
	var d Decision
	decide(&d, limits, cost, res)
	return d
}

// decide writes to d, which is zero but for States, the Decision that
// decision returns. A States with room for every limit (the caller's,
// through AllowNInto) is used for them, else decide allocates them; with
// one limit, or a Result without each limit's part, States is nil.
func decide(d *Decision, limits []Limit, cost int64, res *engine.Result) {
	d.Allowed = res.Allowed
	d.Cost = cost
	d.Remaining = res.Remaining
	d.ResetAfter = micros(res.Reset)
	d.EffectiveWindow = micros(res.Window)
	d.Lease, d.at = res.Lease, res.At
	if uint(res.Binding) < uint(len(limits)) {
		d.Limit = limits[res.Binding]
	}
	if res.Allowed {
		d.Delay = micros(res.Delay)
	} else {
		d.RetryAfter = micros(res.Retry)
	}
	if n := len(res.Limits); n > 1 && n == len(limits) {
		if cap(d.States) >= n {
			d.States = d.States[:n:n]
		} else {
			d.States = make([]LimitState, n)
		}
		for i := range res.Limits {
			r := &res.Limits[i]
			d.States[i] = LimitState{Limit: limits[i], Allowed: r.Allowed, Remaining: r.Remaining,
				ResetAfter: micros(r.Reset), Delay: micros(r.Delay), EffectiveWindow: micros(r.Window)}
			if !r.Allowed {
				d.States[i].RetryAfter = micros(r.Retry)
				d.States[i].Delay = 0
			}
		}
	} else {
		d.States = nil
	}
}

// micros converts µs to a Duration; a negative value means Never, and so
// does a wait too long for a Duration (a clock centuries behind a state's).
func micros(us int64) time.Duration {
	if us < 0 || us > int64(Never/time.Microsecond) {
		return Never
	}
	return time.Duration(us) * time.Microsecond
}
