package core

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/tollgate/tollgate/core/engine"
)

// compilePlan compiles limits (valid) into the plan of scope.
func compilePlan(scope string, limits []Limit) (*engine.Plan, error) {
	var buf [4]engine.Limit
	cl := buf[:0]
	for i := range limits {
		c, err := limits[i].compile()
		if err != nil {
			return nil, err
		}
		cl = append(cl, c)
	}
	return engine.NewPlan(scope, cl)
}

// maxPlans bounds the plans a Limiter keeps for the sets of limits its
// WithLimitsFunc returns (plans and tiers: a handful). Past it, a set's
// plan is compiled on every operation.
const maxPlans = 256

// plans caches the plans of the sets of limits a WithLimitsFunc returns,
// by the limits' values, so that a function that builds its slice anew on
// every call finds its plan without compiling again.
type plans struct {
	mu sync.RWMutex
	m  map[uint64][]cachedPlan // by a hash of the limits' values
	n  int
}

type cachedPlan struct {
	limits []Limit // a copy, to tell the sets of one hash apart
	named  []Limit // limits as decided: unnamed duplicates renamed (distinctDefaults)
	plan   *engine.Plan
}

// planFor returns the limits of key (WithLimitsFunc's, or the Limiter's
// own when it returns none) and their plan. Limits the function returns
// are validated, names included (names reach response headers).
func (l *Limiter) planFor(ctx context.Context, key string) ([]Limit, *engine.Plan, error) {
	limits := l.limitsFn(ctx, key)
	if len(limits) == 0 {
		if l.plan == nil {
			l.log.Log(ctx, "config no limits", 1, slog.LevelError,
				"tollgate: the limits function returned none, and the Limiter has none: every such operation fails",
				slog.String("limiter", l.name))
			return nil, nil, fmt.Errorf("%w: the limits function returned none for key %.64q, and the Limiter has none", ErrInvalidOp, key)
		}
		return l.limits, l.plan, nil
	}
	h := hashLimits(limits)
	l.plans.mu.RLock()
	for _, c := range l.plans.m[h] {
		if equalLimits(c.limits, limits) {
			l.plans.mu.RUnlock()
			return c.named, c.plan, nil
		}
	}
	l.plans.mu.RUnlock()
	named, err := l.checkLimits(ctx, limits)
	if err != nil {
		return nil, nil, err
	}
	plan, err := compilePlan(l.scope, named)
	if err != nil {
		l.logConfig(ctx, err)
		return nil, nil, err
	}
	l.plans.mu.Lock()
	defer l.plans.mu.Unlock()
	for _, c := range l.plans.m[h] {
		if equalLimits(c.limits, limits) {
			return c.named, c.plan, nil
		}
	}
	if l.plans.n < maxPlans {
		if l.plans.m == nil {
			l.plans.m = make(map[uint64][]cachedPlan)
		}
		l.plans.m[h] = append(l.plans.m[h], cachedPlan{limits: append([]Limit(nil), limits...), named: named, plan: plan})
		l.plans.n++
	}
	return named, plan, nil
}

// checkLimits validates the names of limits returned by WithLimitsFunc and
// returns them as decided: unnamed limits that share a derived name get
// distinct ones (distinctDefaults). An invalid set is logged, as a
// configuration error naming the Limiter, and returned.
func (l *Limiter) checkLimits(ctx context.Context, limits []Limit) ([]Limit, error) {
	for i := range limits {
		if err := limits[i].validateName(); err != nil {
			l.logConfig(ctx, err)
			return nil, err
		}
	}
	named := distinctDefaults(limits)
	if err := distinctNames(named); err != nil {
		l.logConfig(ctx, err)
		return nil, err
	}
	return named, nil
}

// distinctDefaults returns limits, or a copy of them in which the unnamed
// limits whose PolicyName another limit has too are named apart: with
// their algorithm ("10-per-1m-gcra") when that tells them apart, else also
// with their place in the list, from 1 ("10-per-1s-sliding-window-2").
// The first limit of a name keeps it. Named limits keep their names: two of
// one name remain an error (distinctNames).
func distinctDefaults(limits []Limit) []Limit {
	if distinctNames(limits) == nil {
		return limits
	}
	out := append([]Limit(nil), limits...)
	taken := make(map[string]bool, len(out))
	for i := range out {
		if out[i].Name != "" {
			taken[out[i].Name] = true
		}
	}
	for i := range out {
		if out[i].Name != "" {
			continue
		}
		n := out[i].PolicyName()
		if taken[n] {
			n += "-" + out[i].Algorithm.String()
		}
		if taken[n] {
			n += "-" + strconv.Itoa(i+1)
		}
		out[i].Name = n
		taken[n] = true
	}
	return out
}

// hashLimits hashes the values of limits, names included.
func hashLimits(limits []Limit) uint64 {
	h := uint64(len(limits))
	mix := func(v uint64) { h = (h ^ v) * 0x100000001b3; h ^= h >> 32 }
	for i := range limits {
		l := &limits[i]
		mix(uint64(l.Algorithm))
		mix(uint64(l.Quota))
		mix(uint64(l.Period))
		mix(uint64(l.Burst))
		mix(uint64(l.Precision))
		for j := 0; j < len(l.Name); j++ {
			mix(uint64(l.Name[j]))
		}
	}
	return h
}

func equalLimits(a, b []Limit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// distinctNames reports limits of one name (Name, or PolicyName when it is
// empty) as an error: RateLimit headers could not tell them apart.
func distinctNames(limits []Limit) error {
	name := func(l *Limit) string {
		if l.Name != "" {
			return l.Name
		}
		return l.PolicyName()
	}
	for i := range limits {
		for j := range i {
			if n := name(&limits[i]); n == name(&limits[j]) {
				return fmt.Errorf("%w: two limits named %q: RateLimit headers could not tell them apart; name one of them (Limit.Named)", ErrInvalidLimit, n)
			}
		}
	}
	return nil
}

// logConfig logs err, an invalid set of limits from WithLimitsFunc, as a
// configuration error naming the Limiter: every operation given that set
// fails with err, and a developer must see why at the first call. One
// line per cause and interval, as failures are.
func (l *Limiter) logConfig(ctx context.Context, err error) {
	l.log.Log(ctx, "config "+err.Error(), 1, slog.LevelError,
		"tollgate: invalid limits from WithLimitsFunc: every operation given them fails",
		slog.String("limiter", l.name), slog.String("error", err.Error()))
}
