package redisstore

import (
	"context"
	"time"
)

// Deadlines of ApplyBy. A core.Limiter bounds each call by its timeout.
// Under a context.WithTimeout, each call would start a runtime timer and
// stop it when answered, about half of that context's cost; at 64 callers
// the context was 15% of the throughput (BENCHMARKS.md). The calls of
// ApplyBy share timers instead: a deadline is rounded up to a whole
// millisecond, and the calls of a lane whose deadlines round to the same
// one share an epoch, one timer and one channel, which closes at it. A
// call's context (byCtx) is done when its epoch is; what waits on the call
// in this package (its caller, a full queue) also waits on the caller's
// own context, so that a caller that leaves (a cancelled request) leaves
// at once. Like any context's, the deadline goes into the script, which
// refuses to run after it, and a reply that comes after it is undone
// (deadline.go).

// An epoch is the deadline of the calls of a lane whose deadlines round up
// to the same millisecond: done closes at it.
type epoch struct {
	n    int64     // the deadline: milliseconds since epochBase
	at   time.Time // the deadline
	done chan struct{}
}

// epochBase is where epochs count milliseconds from; its monotonic reading
// keeps deadlines monotonic.
var epochBase = time.Now()

// epochOf returns the epoch of deadline on l: the lane's latest one when it
// ends at the same millisecond (every call of a Limiter made within that
// millisecond), else a new one, which becomes the latest. Two callers that
// make one at once both serve: each closes at the deadline.
func (l *lane) epochOf(deadline time.Time) *epoch {
	n := int64((deadline.Sub(epochBase) + time.Millisecond - 1) / time.Millisecond)
	if e := l.epoch.Load(); e != nil && e.n == n {
		return e
	}
	e := &epoch{n: n, at: epochBase.Add(time.Duration(n) * time.Millisecond), done: make(chan struct{})}
	time.AfterFunc(time.Until(e.at), func() { close(e.done) })
	l.epoch.Store(e)
	return e
}

// A byCtx is the context of a call of ApplyBy: its caller's (Value, and
// Err once the caller's ends), with the call's deadline (or the caller's,
// if earlier). It is done when its epoch ends, at the deadline: go-redis,
// which bounds its reads and writes by Deadline and its waits for a
// connection and between dials by Done, gives up then. It is not done when
// the caller's context ends first: the waits of this package select on
// the caller's too (call.callerDone), so that the caller leaves at once,
// and what go-redis does meanwhile ends at the deadline, as its reads do.
type byCtx struct {
	context.Context
	e *epoch
}

// Deadline implements context.Context.
func (c *byCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.e.at) {
		return d, true
	}
	return c.e.at, true
}

// Done implements context.Context.
func (c *byCtx) Done() <-chan struct{} { return c.e.done }

// Err implements context.Context: the caller's context's error, or
// context.DeadlineExceeded once the epoch has ended.
func (c *byCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	select {
	case <-c.e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// callerDone returns the Done channel of the context c's caller passed to
// ApplyBy, whose waits select on it beside their own context's (see
// byCtx); nil (never) for a call of Apply, whose context is the caller's.
func (c *call) callerDone() <-chan struct{} {
	if c.by.e == nil {
		return nil
	}
	return c.by.Context.Done()
}
