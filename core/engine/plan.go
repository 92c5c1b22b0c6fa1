package engine

import (
	"fmt"
	"sync"
)

// MaxScopeLen is the longest Plan scope (core's MaxNameLen).
const MaxScopeLen = 128

// A Plan is what every operation of one set of limits shares: the scope
// their keys live in (a Limiter's name) and the limits compiled, prepared
// once (a core.Limiter makes one at New, and one per distinct set of limits
// its WithLimitsFunc returns) and referenced by each Op, so that an
// operation carries a pointer, not its limits. Stores may keep what they
// derive from a plan (a formatted argument, a script) with Value and
// SetValue. A Plan is immutable but for those values, and safe for
// concurrent use.
type Plan struct {
	// Scope separates the keys of plans that share a store: one key in two
	// scopes is two keys. At most MaxScopeLen bytes.
	Scope string
	// Limits are the limits, in the order results report them. At least one.
	Limits []Limit
	// ID is a hash of the limits' numbers (not of the scope): plans of the
	// same limits have the same ID. Stores may key what they derive from
	// the limits by it, comparing SameLimits to be sure.
	ID uint64

	take   uint8 // TakeOne's function, in oneTakes
	values sync.Map
}

// NewPlan returns the plan of limits (compiled by Compile) in scope.
func NewPlan(scope string, limits []Limit) (*Plan, error) {
	switch {
	case len(scope) > MaxScopeLen:
		return nil, fmt.Errorf("%w: scope is %d bytes long, more than %d", ErrInvalidOp, len(scope), MaxScopeLen)
	case len(limits) == 0:
		return nil, fmt.Errorf("%w: a plan needs at least one limit", ErrInvalidOp)
	}
	for i := range limits {
		if limits[i].Ident == 0 || !limits[i].Algorithm.Valid() {
			return nil, fmt.Errorf("%w: limit %d is not compiled (use Compile)", ErrInvalidLimit, i)
		}
	}
	p := &Plan{Scope: scope, Limits: append([]Limit(nil), limits...)}
	p.ID = HashLimits(p.Limits)
	p.take = oneTakeOf(p.Limits)
	return p, nil
}

// HashLimits returns a hash of the numbers of limits: Plan.ID.
func HashLimits(limits []Limit) uint64 {
	h := uint64(len(limits))
	for i := range limits {
		l := &limits[i]
		for _, v := range [...]uint64{l.Ident, uint64(l.Quota), uint64(l.Capacity)} {
			h = (h ^ v) * 0x100000001b3 // FNV-1a's prime, per word
			h ^= h >> 32
		}
	}
	return h
}

// SameLimits reports whether p and q have the same limits (their scopes
// aside).
func (p *Plan) SameLimits(q *Plan) bool {
	if len(p.Limits) != len(q.Limits) {
		return false
	}
	for i := range p.Limits {
		if p.Limits[i] != q.Limits[i] {
			return false
		}
	}
	return true
}

// Value returns the value a store kept under key with SetValue. key must
// be comparable, as a map's key (a store's own pointer is): like
// context.WithValue's, a key == cannot compare panics.
func (p *Plan) Value(key any) (any, bool) { return p.values.Load(key) }

// SetValue keeps v under key unless a value is there already, and returns
// the value kept: v, or the earlier one.
func (p *Plan) SetValue(key, v any) any {
	actual, _ := p.values.LoadOrStore(key, v)
	return actual
}
