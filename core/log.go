package core

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/internal/ratelog"
)

// WithLogger makes the Limiter log to logger what an operator must know
// (see "Logs" in the package doc): store failures, at most about one line
// per second per cause with a count of the rest, and its circuit breakers
// opening and closing. logger must not be nil: to log nothing, pass
// slog.New(slog.DiscardHandler). Default: slog.Default(), read when a line
// is written.
func WithLogger(logger *slog.Logger) Option {
	return optionFunc(func(l *Limiter) error {
		if logger == nil {
			return fmt.Errorf("%w: WithLogger(nil): to log nothing, pass slog.New(slog.DiscardHandler)", ErrInvalidOption)
		}
		l.log = ratelog.New(logger)
		return nil
	})
}

var policyNames = [...]string{failClosed: "fail-closed", failOpen: "fail-open", failFallback: "fallback"}

// logFailure logs a failure of the store (or of the Fallback store) for
// op: the first of a burst of one cause at once, then at most a line a
// second counting (repeated) the further operations of that cause the
// failure policy answered. Calls skipped by the open breaker count there
// too, under the cause that opened it (logSkipped): the breaker's opening
// has a line of its own, its probes do not.
func (l *Limiter) logFailure(ctx context.Context, op *engine.Op, err error) {
	if err == errOpen || !l.log.Enabled(ctx, slog.LevelWarn) {
		return
	}
	l.logCause(ctx, op, ratelog.Cause(err))
}

// logSkipped counts, in the failure line of cause (the error of the
// breaker's last failure), a call that the open breaker skipped.
func (l *Limiter) logSkipped(ctx context.Context, op *engine.Op, cause error) {
	if cause == nil || !l.log.Enabled(ctx, slog.LevelWarn) {
		return
	}
	l.logCause(ctx, op, ratelog.Cause(cause))
}

func (l *Limiter) logCause(ctx context.Context, op *engine.Op, cause string) {
	l.log.Log(ctx, "failure "+cause, 1, slog.LevelWarn, "tollgate: store failed; the failure policy answers",
		slog.String("limiter", l.name), slog.String("op", op.Kind.String()),
		slog.String("policy", policyNames[l.policy.mode]), slog.String("error", cause))
}

// logBreaker logs a transition of the breaker of part: opening (error) and
// closing (info); the probes of an open breaker at debug level.
func (l *Limiter) logBreaker(ctx context.Context, part string, from, to BreakerState, cause error) {
	level, msg := slog.LevelDebug, "tollgate: circuit breaker probing the store"
	switch {
	case to == BreakerClosed:
		level, msg = slog.LevelInfo, "tollgate: circuit breaker closed: the store answers again"
	case from == BreakerClosed:
		level, msg = slog.LevelError, "tollgate: circuit breaker opened: calls skip the store, answered by the failure policy, until a probe succeeds"
	case from == BreakerHalfOpen:
		msg = "tollgate: circuit breaker probe failed"
	}
	if !l.log.Enabled(ctx, level) {
		return
	}
	if level > slog.LevelDebug {
		// The counts of failures before the transition come before it:
		// no "repeated" line of an outage after its breaker closed.
		l.log.Flush()
	}
	attrs := []slog.Attr{slog.String("limiter", l.name)}
	if part != "" {
		attrs = append(attrs, slog.String("part", part))
	}
	if cause != nil {
		attrs = append(attrs, slog.String("error", ratelog.Cause(cause)))
	}
	l.log.Log(ctx, "breaker "+part+" "+from.String()+" "+to.String(), 1, level, msg, attrs...)
}
