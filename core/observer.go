package core

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// An Observer sees what a Limiter decides and what happens to it and its
// store: the one point through which metrics, traces and logs enter,
// without a dependency of this package's on any of them (the modules
// promlimit and otellimit implement it for Prometheus and OpenTelemetry).
// Give it to a Limiter with WithObserver, and to a store with its own
// option (memstore.WithObserver, redisstore.WithObserver).
//
// Both methods are called synchronously, from the goroutine that made the
// decision or saw the event, with the context of the operation concerned
// (for an event that has none, context.Background()). They must be safe
// for concurrent use and quick: count, record, hand off. The pointer they
// receive, and everything it points to, is valid only during the call
// (the Limiter reuses it): copy what must outlive it. They must not call
// the Limiter or the store that reports to them.
type Observer interface {
	// ObserveDecision is called once per operation of a Limiter (Allow,
	// AllowN, Peek, PeekN, Charge, Refund, Reset, Release), after it is decided,
	// whatever the outcome, errors included.
	ObserveDecision(ctx context.Context, o *Observation)
	// ObserveEvent is called for everything else worth knowing: a circuit
	// breaker changing state, a store's evictions and key count, a Redis
	// store's script loads, compensations, redirects, topology reloads, and
	// the failures it sees after its caller gave up (see EventKind).
	ObserveEvent(ctx context.Context, e *Event)
}

// An Observation is one operation of a Limiter, as an Observer sees it.
type Observation struct {
	// Limiter is the Limiter's name (Limiter.Name: WithName, or its
	// limits' names joined with "+"). Bounded: a label.
	Limiter string
	// Operation is what was asked: take (Allow, AllowN), peek, charge,
	// refund, reset or release.
	Operation Operation
	// Outcome is how the operation ended. Bounded: a label.
	Outcome Outcome
	// Policy is the name of the binding limit (Decision.Limit: Limit.Name,
	// or Limit.PolicyName when it has none); for an operation that failed
	// without a Decision, the name of the key's first limit; "" when the
	// limits are unknown (invalid input). Bounded by the limits configured:
	// a label.
	Policy string
	// Key is the key limited. It is unbounded and often personal (an IP
	// address, a user or an API key): never a metric label, and in traces
	// only where the user opts in.
	Key string
	// Cost is the cost the operation was asked for.
	Cost int64
	// Wait is the queueing delay of an admitted LeakyBucket cost
	// (Decision.Delay); 0 otherwise.
	Wait time.Duration
	// Latency is how long the call to the Limiter's store took, failed
	// calls included (stores validate the operation: an invalid cost is a
	// call); 0 when no call was made (a call skipped by the open circuit
	// breaker, an invalid limit from WithLimitsFunc).
	Latency time.Duration
	// Decision is the operation's Decision; the zero Decision when the
	// operation returned an error.
	Decision Decision
	// Err is the store's error behind a failure, even when the failure
	// policy answered without an error (failed open, fallback), or the
	// error the operation returned; nil otherwise.
	Err error
}

// Operation is the kind of a Limiter's operation.
type Operation uint8

// Operations, named by String.
const (
	OpTake    Operation = iota // Allow, AllowN: "take"
	OpPeek                     // Peek, PeekN: "peek"
	OpCharge                   // Charge: "charge"
	OpRefund                   // Refund: "refund"
	OpReset                    // Reset: "reset"
	OpRelease                  // Release: "release"
)

var operationNames = [...]string{"take", "peek", "charge", "refund", "reset", "release"}

// String returns "take", "peek", "charge", "refund", "reset" or "release".
func (op Operation) String() string {
	if int(op) < len(operationNames) {
		return operationNames[op]
	}
	return "Operation(" + strconv.Itoa(int(op)) + ")"
}

// Outcome is how an operation of a Limiter ended.
type Outcome uint8

// Outcomes, named by String.
const (
	// OutcomeAllowed: the store admitted the cost (or, for peek, charge, refund
	// and reset, the key is within its limits). "allowed"
	OutcomeAllowed Outcome = iota
	// OutcomeDenied: the store denied it. "denied"
	OutcomeDenied
	// OutcomeDryRunDenied: the store denied it, but the caller marked the
	// operation as a dry run (ContextWithDryRun: guard.WithDryRun does), so
	// the request passes anyway. "dry_run_denied"
	OutcomeDryRunDenied
	// OutcomeFailedOpen: the store failed and FailOpen admitted the cost.
	// "failed_open"
	OutcomeFailedOpen
	// OutcomeFailedClosed: the store failed (or was skipped by the open breaker)
	// and the operation returned an error wrapping ErrUnavailable: the
	// FailClosed policy, or a Fallback whose store failed too.
	// "failed_closed"
	OutcomeFailedClosed
	// OutcomeFallbackAllowed: the store failed and the Fallback store admitted
	// the cost. "fallback_allowed"
	OutcomeFallbackAllowed
	// OutcomeFallbackDenied: the store failed and the Fallback store denied the
	// cost. "fallback_denied"
	OutcomeFallbackDenied
	// OutcomeInvalid: the input was invalid (an error wrapping ErrInvalidLimit,
	// ErrInvalidCost, ErrInvalidKey or ErrInvalidOp). "invalid"
	OutcomeInvalid
	// OutcomeError: another error that is not a store failure: a closed store
	// (ErrClosed), or the caller's own context ending. "error"
	OutcomeError
	// OutcomeCachedDenied: the deny cache (WithDenyCache) denied it with a
	// denial of the store's it remembered, without calling the store.
	// "cached_denied"
	OutcomeCachedDenied
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"allowed", "denied", "dry_run_denied", "failed_open", "failed_closed",
	"fallback_allowed", "fallback_denied", "invalid", "error", "cached_denied"}

// String returns the outcome's name: "allowed", "denied", "dry_run_denied",
// "failed_open", "failed_closed", "fallback_allowed", "fallback_denied",
// "invalid", "error" or "cached_denied".
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// An Event is something other than a decision that an Observer should
// know: which fields are set depends on Kind.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Limiter is the name of the Limiter that reports the event
	// (EventBreaker); "" for a store's events.
	Limiter string
	// Store names the store that reports the event: "memstore" (or the name
	// given by memstore.WithName), "redisstore"; "" for a Limiter's events.
	Store string
	// Part is the part of a Partitioned store concerned (a Redis Cluster
	// master's address), "" for a store that is not partitioned or when it
	// is unknown.
	Part string
	// From and To are the breaker's states before and after (EventBreaker).
	From, To BreakerState
	// Count is how many times it happened (EventEviction, EventScriptLoad,
	// EventRedirect, EventCompensation): an event may stand for several.
	Count int64
	// Keys is the store's number of keys (EventKeys).
	Keys int64
	// Lossy reports, for EventEviction, that the keys evicted still had
	// usage: each one's next request starts with its whole quota.
	Lossy bool
	// Limit, InFlight and Latency describe an adaptive concurrency limit
	// (EventAdaptive, package adaptive): its limit for critical requests,
	// the units in flight, and its no-load latency estimate.
	Limit, InFlight int64
	Latency         time.Duration
	// Err is the cause: the failure that opened the breaker (EventBreaker
	// to BreakerOpen), the failure seen (EventStoreFailure), the failure of
	// an undo (EventCompensation); nil otherwise.
	Err error
}

// EventKind says what an Event is about.
type EventKind uint8

// Event kinds, named by String.
const (
	// EventBreaker: a Limiter's circuit breaker for Part changed state,
	// From → To; Err is the failure that opened it. "breaker"
	EventBreaker EventKind = iota
	// EventStoreFailure: a store saw a call fail after its caller had given
	// up (a timeout answered by the failure policy): Err is the real cause,
	// such as "connect: connection refused", where the caller saw only its
	// context's deadline. "store_failure"
	EventStoreFailure
	// EventKeys: the store holds Keys keys (memstore, every second).
	// "keys"
	EventKeys
	// EventEviction: the store evicted Count keys to make room (memstore
	// under WithMaxKeys), Lossy ones with usage. "eviction"
	EventEviction
	// EventScriptLoad: the Redis store loaded its script Count times on
	// Part, the server having lost it (NOSCRIPT: a restart, a failover,
	// SCRIPT FLUSH). "script_load"
	EventScriptLoad
	// EventCompensation: the Redis store undid an operation whose reply
	// came after its caller gave up (Count of them); Err, when set, is why
	// the undo failed, leaving the change in place. "compensation"
	EventCompensation
	// EventRedirect: a Redis Cluster node refused Count operations without
	// running them (MOVED, ASK, TRYAGAIN...), and the store sent them again
	// where the cluster client routes them. "redirect"
	EventRedirect
	// EventTopologyReload: the Redis store had the cluster client reload
	// the cluster's topology (after a redirect, or every 250ms after a
	// node failed). "topology_reload"
	EventTopologyReload
	// EventAdaptive: an adaptive concurrency limit (package adaptive)
	// ended a window of samples: its Limit, InFlight and Latency (the
	// no-load latency estimate) after it, and the requests it shed in the
	// window (Count). Limiter is its name. "adaptive"
	EventAdaptive
	numEventKinds
)

var eventKindNames = [numEventKinds]string{"breaker", "store_failure", "keys", "eviction", "script_load",
	"compensation", "redirect", "topology_reload", "adaptive"}

// String returns the kind's name, as listed with the constants.
func (k EventKind) String() string {
	if k < numEventKinds {
		return eventKindNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// WithObserver makes the Limiter report every decision and event to obs
// (see Observer); given several times, it reports to each, in the order
// given. obs must not be nil. Without an observer, a decision costs one
// more nil check; with one, it allocates nothing more. Default: none.
func WithObserver(obs Observer) Option {
	return optionFunc(func(l *Limiter) error {
		if obs == nil {
			return fmt.Errorf("%w: WithObserver(nil)", ErrInvalidOption)
		}
		l.obs = JoinObservers(l.obs, obs)
		return nil
	})
}

// JoinObservers returns an Observer that reports to each of obs in turn,
// skipping nil ones: nil when none is left, the one itself when one is.
// Stores' options use it to accept several observers.
func JoinObservers(obs ...Observer) Observer {
	var all observers
	for _, o := range obs {
		switch o := o.(type) {
		case nil:
		case observers:
			all = append(all, o...)
		default:
			all = append(all, o)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return all
}

type observers []Observer

func (os observers) ObserveDecision(ctx context.Context, o *Observation) {
	for _, obs := range os {
		obs.ObserveDecision(ctx, o)
	}
}

func (os observers) ObserveEvent(ctx context.Context, e *Event) {
	for _, obs := range os {
		obs.ObserveEvent(ctx, e)
	}
}

type dryRunKey struct{}

// ContextWithDryRun returns ctx marked as a dry run when on (ctx itself
// otherwise): a Limiter's denials under it are observed as OutcomeDryRunDenied,
// since the caller lets the request pass anyway. It changes no decision.
// guard.WithDryRun marks its Limiters' calls so.
func ContextWithDryRun(ctx context.Context, on bool) context.Context {
	if !on {
		return ctx
	}
	return context.WithValue(ctx, dryRunKey{}, true)
}

// IsDryRun reports whether ctx is marked by ContextWithDryRun.
func IsDryRun(ctx context.Context) bool {
	on, _ := ctx.Value(dryRunKey{}).(bool)
	return on
}
