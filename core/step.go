package core

import (
	"fmt"
	"time"
)

// Step is the reference implementation of every algorithm and operation:
// stores call it (or, like the Redis store, a port that storetest holds to
// identical results). It validates op, then applies it at now (Unix
// microseconds) to states, one per limit of op.Limits in the same order,
// changing them in place, and returns the Decision and keep: how long until
// every state is fully replenished, after which the key's states equal fresh
// ones and may be deleted (0: already).
//
// Step reads neither op.Now nor, beyond checking it is not empty, op.Key;
// it does not check limit names, which only headers read (Limit.Validate
// does). On error it changes nothing. It is a pure function of its
// arguments and the states.
func Step(op *Op, now int64, states []State) (d Decision, keep time.Duration, err error) {
	keep, err = StepTo(op, now, states, &d)
	return d, keep, err
}

// StepTo is Step writing the Decision to *d, for stores that return it
// without copying it again. On error *d is unchanged.
func StepTo(op *Op, now int64, states []State, d *Decision) (keep time.Duration, err error) {
	switch {
	case op.Kind >= numKinds:
		return 0, fmt.Errorf("%w: unknown kind %d", ErrInvalidOp, op.Kind)
	case op.Key == "":
		return 0, fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(op.Scope) > MaxNameLen:
		return 0, fmt.Errorf("%w: scope is %d bytes long, more than %d", ErrInvalidOp, len(op.Scope), MaxNameLen)
	case op.Cost < 0:
		return 0, fmt.Errorf("%w: cost %d is negative (key %.64q)", ErrInvalidCost, op.Cost, op.Key)
	case len(op.Limits) == 0:
		return 0, fmt.Errorf("%w: no limits (key %.64q)", ErrInvalidOp, op.Key)
	case len(states) != len(op.Limits):
		return 0, fmt.Errorf("%w: %d states for %d limits", ErrInvalidOp, len(states), len(op.Limits))
	}
	if len(states) == 1 {
		return step1(op, now, &states[0], d)
	}
	var sbuf [4]shape
	var vbuf [4]verdict
	shapes, vs := sbuf[:0], vbuf[:0]
	if n := len(op.Limits); n <= len(sbuf) {
		shapes, vs = sbuf[:n], vbuf[:n]
	} else {
		shapes, vs = make([]shape, n), make([]verdict, n)
	}
	for i := range op.Limits {
		if err = op.Limits[i].compile(&shapes[i]); err != nil {
			return 0, err
		}
	}
	allowed := true
	for i := range shapes {
		shapes[i].first(&states[i], op, now, &vs[i])
		allowed = allowed && vs[i].ok
	}
	for i := range shapes {
		if op.Kind != Take || allowed {
			shapes[i].second(&states[i], &vs[i], op, now)
		} else {
			vs[i].remaining, vs[i].reset = shapes[i].report(&states[i], now)
		}
		if r := micros(vs[i].reset); r > keep {
			keep = r
		}
	}
	*d = decide(op, vs)
	return keep, nil
}

// step1 is Step for a single limit, without the bookkeeping of several.
// It writes the Decision to d, unless it fails.
func step1(op *Op, now int64, st *State, d *Decision) (time.Duration, error) {
	var sh shape
	if err := op.Limits[0].compile(&sh); err != nil {
		return 0, err
	}
	var v verdict
	sh.first(st, op, now, &v)
	if op.Kind != Take || v.ok {
		sh.second(st, &v, op, now)
	} else {
		v.remaining, v.reset = sh.report(st, now)
	}
	*d = Decision{}
	d.Allowed = v.ok
	d.Cost = op.Cost
	d.Limit = op.Limits[0]
	d.Remaining = v.remaining
	d.ResetAfter = micros(v.reset)
	if v.ok {
		d.Delay = micros(v.delay)
	} else {
		d.RetryAfter = micros(v.retry)
	}
	return d.ResetAfter, nil
}

// verdict is one limit's part of a decision, in microseconds.
type verdict struct {
	ok               bool
	retry            int64 // when !ok: until the cost could pass, -1 for never
	delay            int64 // LeakyBucket queueing delay when ok
	remaining, reset int64 // after the operation
}

// first brings st up to now and, for Take and Peek, checks the cost into v.
func (sh *shape) first(st *State, op *Op, now int64, v *verdict) {
	if st.Ident != sh.id {
		sh.fresh(st, now)
	}
	sh.roll(st, now)
	if op.Kind != Take && op.Kind != Peek {
		v.ok = true
		return
	}
	sh.check(st, now, op.Cost, v)
}

// second applies the change of an operation that goes ahead (an allowed
// Take, or any Charge, Refund or Reset) and reports the state after it.
// Charge, Refund and Reset then report as a Peek of cost 0 would.
func (sh *shape) second(st *State, v *verdict, op *Op, now int64) {
	switch op.Kind {
	case Take:
		sh.add(st, now, op.Cost)
	case Charge:
		sh.add(st, now, op.Cost)
	case Refund:
		sh.add(st, now, -op.Cost)
	case Reset:
		sh.fresh(st, now)
	}
	if op.Kind >= Charge {
		sh.check(st, now, 0, v)
		v.delay = 0
	}
	v.remaining, v.reset = sh.report(st, now)
}

// check sets v's verdict on cost c.
func (sh *shape) check(st *State, now, c int64, v *verdict) {
	v.ok, v.retry, v.delay = sh.need(st, now, c)
	if !v.ok {
		v.delay = 0
	}
}

// decide converts the verdicts of several limits to LimitStates and
// combines them.
func decide(op *Op, vs []verdict) Decision {
	allowed := true
	for _, v := range vs {
		allowed = allowed && v.ok
	}
	ls := make([]LimitState, len(vs))
	for i, v := range vs {
		ls[i] = LimitState{Limit: op.Limits[i], Allowed: v.ok, Remaining: v.remaining, ResetAfter: micros(v.reset)}
		if v.ok && allowed { // nothing is queued unless every limit admits
			ls[i].Delay = micros(v.delay)
		} else if !v.ok {
			ls[i].RetryAfter = micros(v.retry)
		}
	}
	return Combine(op, ls)
}

// Combine assembles the Decision of op from the states of its limits, in
// the order of op.Limits, for stores that compute each limit's state
// themselves (the Redis store's Lua does). It is all or nothing: Allowed
// when every limit allows. The binding limit is, when denied, the denying
// one with the longest RetryAfter; when allowed, the one with the least
// Remaining, then the longest ResetAfter. States is ls when there are
// several limits, nil for one. Combine keeps ls.
func Combine(op *Op, ls []LimitState) Decision {
	d := Decision{Cost: op.Cost, Allowed: true}
	if len(ls) == 0 {
		return d
	}
	for _, s := range ls {
		d.Allowed = d.Allowed && s.Allowed
	}
	bind := -1
	for i, s := range ls {
		if d.Allowed {
			d.Delay = max(d.Delay, s.Delay)
			if bind < 0 || s.Remaining < ls[bind].Remaining || (s.Remaining == ls[bind].Remaining && s.ResetAfter > ls[bind].ResetAfter) {
				bind = i
			}
		} else if !s.Allowed && (bind < 0 || s.RetryAfter > ls[bind].RetryAfter) {
			bind = i
		}
	}
	b := ls[bind]
	d.Limit, d.Remaining, d.ResetAfter = b.Limit, b.Remaining, b.ResetAfter
	if !d.Allowed {
		d.RetryAfter = b.RetryAfter
	}
	if len(ls) > 1 {
		d.States = ls
	}
	return d
}

// micros converts µs to a Duration; -1 means Never, and so does a wait too
// long for a Duration (a clock centuries behind the state's).
func micros(us int64) time.Duration {
	if us < 0 || us > int64(Never/time.Microsecond) {
		return Never
	}
	return time.Duration(us) * time.Microsecond
}
