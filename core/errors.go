package core

import (
	"errors"

	"github.com/tollgate/tollgate/core/engine"
)

// Sentinel errors. Match them with errors.Is: the errors returned by this
// package and by stores wrap them with the key, limit or operation concerned.
// Being rate limited is never an error: it is a Decision with Allowed false.
var (
	// ErrInvalidLimit reports a Limit that Validate rejects.
	ErrInvalidLimit = engine.ErrInvalidLimit
	// ErrInvalidCost reports a negative cost.
	ErrInvalidCost = engine.ErrInvalidCost
	// ErrInvalidKey reports an empty key.
	ErrInvalidKey = engine.ErrInvalidKey
	// ErrInvalidOption reports an option of New that cannot be used: a
	// timeout that is not positive, a nil function, a negative setting.
	ErrInvalidOption = errors.New("tollgate: invalid option")
	// ErrInvalidOp reports an operation that is malformed in another way:
	// no limits, say.
	ErrInvalidOp = engine.ErrInvalidOp
	// ErrClosed reports a call on a store that has been closed.
	ErrClosed = errors.New("tollgate: store closed")
	// ErrUnavailable reports that the store failed (an error, a timeout) or
	// is skipped by the circuit breaker, under the FailClosed policy (or a
	// Fallback whose store failed too). Adapters answer 503, without the
	// error's text.
	ErrUnavailable = errors.New("tollgate: store unavailable")
)
