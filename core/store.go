package core

import (
	"context"

	"github.com/tollgate/tollgate/core/engine"
)

// A Store holds limit state and applies operations to it atomically: the
// in-memory memstore (the default) and the Redis redisstore are two. Store
// authors implement it with package engine, whose Step is the one
// definition of every algorithm that every store shares (or, like the
// Redis store, with a port of it that the storetest suite holds to
// identical results). Implementations must be safe for concurrent use.
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
