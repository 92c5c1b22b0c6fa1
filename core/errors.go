package core

import "errors"

// Sentinel errors. Match them with errors.Is: the errors returned by this
// package and by stores wrap them with the key, limit or operation concerned.
// Being rate limited is never an error: it is a Decision with Allowed false.
var (
	// ErrInvalidLimit reports a Limit that Validate rejects.
	ErrInvalidLimit = errors.New("tollgate: invalid limit")
	// ErrInvalidCost reports a negative cost.
	ErrInvalidCost = errors.New("tollgate: invalid cost")
	// ErrInvalidKey reports an empty key.
	ErrInvalidKey = errors.New("tollgate: invalid key")
	// ErrInvalidOption reports an option of New that cannot be used: a
	// timeout that is not positive, a nil function, a negative setting.
	ErrInvalidOption = errors.New("tollgate: invalid option")
	// ErrInvalidOp reports an operation that is malformed in another way:
	// an unknown Kind, or no limits.
	ErrInvalidOp = errors.New("tollgate: invalid operation")
	// ErrClosed reports a call on a store that has been closed.
	ErrClosed = errors.New("tollgate: store closed")
	// ErrUnavailable reports that the store failed (an error, a timeout) or
	// is skipped by the circuit breaker, under the FailClosed policy (or a
	// Fallback whose store failed too). Adapters answer 503, without the
	// error's text.
	ErrUnavailable = errors.New("tollgate: store unavailable")
)
