package core

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/core/engine"
)

// A Store holds limit state and applies operations to it atomically: the
// in-memory memstore (the default) and the Redis redisstore are two. Store
// authors implement it with package engine, whose Step is the one
// definition of every algorithm that every store shares (or, like the
// Redis store, with a port of it that the storetest suite holds to
// identical results). Implementations must be safe for concurrent use.
//
// An InProcess store may also have a method
//
//	TakeBrief(ctx context.Context, plan *engine.Plan, key string, cost int64) (
//		allowed bool, remaining, reset, wait, window, lease, at int64, err error)
//
// which does what Apply does for a Take of cost for key under plan, and
// returns the Result in brief, the fields of an engine.Brief one by one: a
// Limiter of one limit, with no clock, observer or deny cache of its own,
// calls it instead of Apply. Passed in registers, its arguments and
// results save copying an Op and a Result through memory on every
// decision; returned as one Brief, the caller would copy the struct
// through memory again, and stall on reading it back (memstore has it).
//
// A Store that is not InProcess may have a method
//
//	ApplyLocal(op engine.Op) (engine.Result, bool)
//
// which decides op in process when it can, without I/O and without
// blocking, and returns its Result and true; or returns false, changing
// nothing. A Limiter calls it before the timeout and the circuit
// breaker of a remote call, and Apply only when it returns false: a store
// that answers most operations from memory (package lease) then costs no
// more than memory does.
//
// A Store that is not InProcess may also have a method
//
//	ApplyBy(ctx context.Context, op engine.Op, deadline time.Time) (engine.Result, error)
//
// which is Apply bounded by deadline as well as by ctx. A Limiter calls it
// instead of Apply, with its timeout (WithTimeout) as the deadline, where
// it would otherwise derive a context with that deadline, which costs a
// timer, a context and a channel on every call: a store that waits in a
// queue of its own can bound its callers' waits more cheaply (redisstore
// has it). It must give up at the deadline just as at ctx's.
//
// A Limiter finds these optional methods by type assertion. A wrapper that
// embeds a store and overrides Apply (to count or to log) has the
// embedded store's TakeBrief, ApplyLocal or ApplyBy promoted all the same, and the
// Limiter calls those instead of its Apply: such a wrapper must define
// them too, or hold the store in a named field rather than embed it.
type Store interface {
	// Apply runs op atomically over all the limits of op.Plan for op.Key,
	// and returns the Result. It returns an error, and changes nothing,
	// when op is invalid (engine.Op.Validate) or the store fails; being
	// limited is not an error.
	Apply(ctx context.Context, op engine.Op) (engine.Result, error)
	// Close releases the store's resources. Apply after Close returns an
	// error wrapping ErrClosed.
	Close() error
}

// localApplier is the optional method of a Store described in Store's doc.
type localApplier interface {
	ApplyLocal(op engine.Op) (engine.Result, bool)
}

// deadlineApplier is the optional method of a Store described in Store's
// doc.
type deadlineApplier interface {
	ApplyBy(ctx context.Context, op engine.Op, deadline time.Time) (engine.Result, error)
}
