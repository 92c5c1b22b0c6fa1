package engine

import "errors"

// Sentinel errors of invalid input; package core re-exports them (core's
// ErrInvalidLimit is this ErrInvalidLimit), so errors.Is matches either.
var (
	// ErrInvalidLimit reports a limit that Compile rejects.
	ErrInvalidLimit = errors.New("tollgate: invalid limit")
	// ErrInvalidCost reports a negative cost.
	ErrInvalidCost = errors.New("tollgate: invalid cost")
	// ErrInvalidKey reports an empty key.
	ErrInvalidKey = errors.New("tollgate: invalid key")
	// ErrInvalidOp reports an operation that is malformed in another way:
	// an unknown Kind, no plan or no limits, a scope too long.
	ErrInvalidOp = errors.New("tollgate: invalid operation")
)
