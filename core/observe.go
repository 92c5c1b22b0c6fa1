package core

import (
	"context"
	"errors"
	"sync"

	"github.com/tollgate/tollgate/core/engine"
)

// observations recycles the Observations of decisions, so that observing
// allocates nothing per decision.
var observations = sync.Pool{New: func() any { return new(Observation) }}

// observe runs an operation and reports it to the Limiter's observers.
func (l *Limiter) observe(ctx context.Context, op engine.Op) (Decision, error) {
	o := observations.Get().(*Observation)
	o.Limiter, o.Operation, o.Key, o.Cost = l.name, Operation(op.Kind), op.Key, op.Cost
	d, err := l.op(ctx, op, o)
	o.Decision = d
	if err == nil {
		o.Wait = d.Delay
		o.Policy = limitName(&d.Limit)
		o.Outcome = outcomeOf(ctx, &d)
	} else {
		if o.Err == nil {
			o.Err = err
		}
		switch {
		case invalid(err):
			o.Outcome = OutcomeInvalid
		case errors.Is(err, ErrUnavailable):
			o.Outcome = OutcomeFailedClosed
		default:
			o.Outcome = OutcomeError
		}
	}
	l.obs.ObserveDecision(ctx, o)
	*o = Observation{} // drop the references before the pool keeps it
	observations.Put(o)
	return d, err
}

// outcomeOf returns the outcome of d, made under ctx.
func outcomeOf(ctx context.Context, d *Decision) Outcome {
	switch {
	case d.Source == FromFailOpen:
		return OutcomeFailedOpen
	case d.Source == FromFallback && d.Allowed:
		return OutcomeFallbackAllowed
	case d.Source == FromFallback:
		return OutcomeFallbackDenied
	case d.Allowed:
		return OutcomeAllowed
	case IsDryRun(ctx):
		return OutcomeDryRunDenied
	case d.Source == FromDenyCache:
		return OutcomeCachedDenied
	}
	return OutcomeDenied
}

// invalid reports whether err reports invalid input.
func invalid(err error) bool {
	return errors.Is(err, ErrInvalidLimit) || errors.Is(err, ErrInvalidCost) || errors.Is(err, ErrInvalidKey) ||
		errors.Is(err, ErrInvalidOp)
}

// limitName returns l's name, or the one derived from its numbers.
func limitName(l *Limit) string {
	if l.Name != "" {
		return l.Name
	}
	if l.Quota == 0 {
		return "" // the zero Limit: no limit known
	}
	return l.PolicyName()
}

// breakerChanged reports a transition of the breaker of part (see
// breakers).
func (l *Limiter) breakerChanged(ctx context.Context, part string, from, to BreakerState, cause error) {
	l.logBreaker(ctx, part, from, to, cause)
	if l.obs != nil {
		e := Event{Kind: EventBreaker, Limiter: l.name, Part: part, From: from, To: to, Err: cause}
		l.obs.ObserveEvent(ctx, &e)
	}
}
