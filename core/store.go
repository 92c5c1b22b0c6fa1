package core

import (
	"context"
	"fmt"
	"time"
)

// A Store holds limit state and applies operations to it atomically.
// Implementations must be safe for concurrent use.
//
// Stores compute decisions with Step (or, like the Redis store, with a port
// of it that storetest holds to identical results), so every store shares
// one definition of every algorithm.
type Store interface {
	// Apply runs op atomically over all limits of op.Key and returns the
	// Decision. It returns an error, and changes nothing, when op is invalid
	// (see Op.Validate) or the store fails; being limited is not an error.
	Apply(ctx context.Context, op Op) (Decision, error)
	// Close releases the store's resources. Apply after Close returns an
	// error wrapping ErrClosed.
	Close() error
}

// Kind is the kind of an Op.
type Kind uint8

const (
	// Take admits Cost against every limit, all or nothing: every limit is
	// checked first, and only when all admit it is each one charged.
	// A denied Take changes nothing.
	Take Kind = iota
	// Peek reports what Take would decide, changing nothing.
	Peek
	// Charge adds Cost to every limit unconditionally: post-hoc overage, for
	// requests whose real cost is known after they ran. Usage may go over
	// the quota (up to DebtFactor × capacity), so later requests wait.
	Charge
	// Refund gives Cost back to every limit, never below zero usage.
	Refund
	// Reset forgets the key: every limit is fully replenished.
	Reset

	numKinds
)

var kindNames = [numKinds]string{"take", "peek", "charge", "refund", "reset"}

// String returns the kind's name, e.g. "take".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// An Op is one operation on one key's limits.
type Op struct {
	// Kind is what to do. Default: Take.
	Kind Kind
	// Scope separates the keys of Limiters that share a store: one Key in
	// two scopes is two keys. A Limiter sets it to its name (WithName).
	// At most MaxNameLen bytes. Default: the empty scope.
	Scope string
	// Key identifies who is limited. It must not be empty; stores accept any
	// bytes and bound the memory of long keys themselves.
	Key string
	// Limits are the key's limits, each counted separately. At least one.
	Limits []Limit
	// Cost is the cost units of the operation, at least 0. For Take and
	// Peek a cost above a limit's capacity is denied with RetryAfter Never.
	Cost int64
	// Now is the time of the operation. Default (zero): the store's clock.
	Now time.Time
}

// Validate reports whether op is well formed, with an error wrapping
// ErrInvalidKey, ErrInvalidCost, ErrInvalidOp or ErrInvalidLimit.
func (op *Op) Validate() error {
	switch {
	case op.Kind >= numKinds:
		return fmt.Errorf("%w: unknown kind %d", ErrInvalidOp, op.Kind)
	case op.Key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(op.Scope) > MaxNameLen:
		return fmt.Errorf("%w: scope is %d bytes long, more than %d", ErrInvalidOp, len(op.Scope), MaxNameLen)
	case op.Cost < 0:
		return fmt.Errorf("%w: cost %d is negative (key %.64q)", ErrInvalidCost, op.Cost, op.Key)
	case len(op.Limits) == 0:
		return fmt.Errorf("%w: no limits (key %.64q)", ErrInvalidOp, op.Key)
	}
	for i := range op.Limits {
		var sh shape
		if err := op.Limits[i].compile(&sh); err != nil {
			return err
		}
	}
	return nil
}
