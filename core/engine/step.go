package engine

import (
	"fmt"
	"strconv"
)

// Kind is the kind of an Op.
type Kind uint8

const (
	// Take admits Cost against every limit, all or nothing: every limit is
	// checked first, and only when all admit it is each one charged. A
	// denied Take changes nothing.
	Take Kind = iota
	// Peek reports what Take would decide, changing nothing.
	Peek
	// Charge adds Cost to every limit unconditionally: post-hoc overage.
	// Usage may go over the quota (up to DebtFactor × capacity).
	Charge
	// Refund gives Cost back to every limit, never below zero usage.
	Refund
	// Reset forgets the key: every limit is fully replenished.
	Reset
	// Release ends the acquisition of Op.Lease on the key's Concurrency
	// limits: the units it holds are in flight no more. A second Release of
	// one lease, or of a lease that expired, changes nothing. Other limits
	// are left alone.
	Release

	numKinds
)

var kindNames = [numKinds]string{"take", "peek", "charge", "refund", "reset", "release"}

// String returns the kind's name, e.g. "take".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// An Op is one operation on one key's limits. It is small and passed by
// value: the limits are the Plan's, prepared once.
type Op struct {
	// Plan holds the limits and the scope. Required.
	Plan *Plan
	// Key identifies who is limited. It must not be empty; stores accept
	// any bytes and bound the memory of long keys themselves.
	Key string
	// Kind is what to do. Default: Take.
	Kind Kind
	// Cost is the cost units of the operation, at least 0. For Take and
	// Peek a cost above a limit's capacity is denied, never to pass.
	Cost int64
	// Now is the time of the operation in Unix µs; 0 means the store's own
	// clock (so the instant 0, in 1970, cannot be asked for).
	Now int64
	// Lease is, for Release, the lease to end: the Result.Lease of the Take
	// that acquired it.
	Lease int64
	// Receipt is, for Refund, where the charge being refunded went (see
	// Receipt): the units go back there and nowhere else. nil: to the
	// current state, the older meaning.
	Receipt *Receipt
	// Parts is, optionally, the memory of Result.Limits for a plan of
	// several limits: Step writes each limit's part there when it has a
	// place for every limit, and the Result refers to it; else Step
	// allocates. A caller so brings memory it reuses once the call returns
	// (core, from a pool). Step writes it during the call alone: core gives
	// it only to a store of this repository that applies each op once,
	// before Apply returns, and keeps no Result (memstore).
	Parts []LimitResult
}

// Validate reports whether op is well formed, with an error wrapping
// ErrInvalidKey, ErrInvalidCost or ErrInvalidOp.
func (op *Op) Validate() error {
	switch {
	case op.Plan == nil || len(op.Plan.Limits) == 0:
		return fmt.Errorf("%w: no plan", ErrInvalidOp)
	case op.Kind >= numKinds:
		return fmt.Errorf("%w: unknown kind %d", ErrInvalidOp, op.Kind)
	case op.Key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case op.Cost < 0:
		return fmt.Errorf("%w: cost %d is negative (key %.64q)", ErrInvalidCost, op.Cost, op.Key)
	case op.Kind == Release && op.Lease <= 0:
		return fmt.Errorf("%w: release of lease %d, which no Take returned (key %.64q)", ErrInvalidOp, op.Lease, op.Key)
	case op.Receipt != nil && (op.Kind != Refund || !op.Receipt.valid()):
		return fmt.Errorf("%w: a %s with a receipt (at %d, span %d, cost %d): only a refund takes one, at 1 or later, with a span in [0, at] and a cost of 0 or more (key %.64q)",
			ErrInvalidOp, op.Kind, op.Receipt.At, op.Receipt.Span, op.Receipt.Cost, op.Key)
	}
	return nil
}

// Result is the outcome of an Op: what a store returns. Times are µs from
// the time of the operation; -1 means never.
//
// Its own fields are those of the binding limit: when denied, the denying
// limit with the longest Retry; when allowed, the limit with the least
// Remaining, then the longest Reset. With several limits, Limits holds
// each one's part, in the plan's order; with one, it is nil.
type Result struct {
	// Allowed reports whether the operation was allowed: every limit
	// admitted the cost (Take), or would (Peek). For Charge, Refund and
	// Reset, whether the key is within all its limits after the change.
	Allowed bool
	// Binding is the index of the binding limit in Plan.Limits.
	Binding int
	// Remaining is the cost units left under the binding limit after the
	// operation, floored, never negative.
	Remaining int64
	// Reset is the time until the binding limit is fully replenished if
	// nothing else arrives.
	Reset int64
	// Retry is, when denied, the time until the same cost could pass every
	// limit if nothing else arrives; -1 when it exceeds a capacity.
	Retry int64
	// Delay is, when allowed, the longest LeakyBucket queueing delay.
	Delay int64
	// Window is the binding limit's effective window: the time within
	// which the key can use no more than Remaining units, had it used them
	// all at once now (draft-ietf-httpapi-ratelimit-headers-11's t). It is
	// when one more unit would pass after Remaining were taken.
	Window int64
	// Lease is, when an allowed Take of a cost above 0 acquired units on
	// Concurrency limits, the acquisition's lease: an identifier for
	// Release, never issued twice on the key (it is the acquisition's
	// time, µs, or one µs after the key's newest lease). 0 otherwise.
	Lease int64
	// Limits holds every limit's part when the plan has several.
	Limits []LimitResult
	// At is the time the store applied the operation at, Unix µs: a
	// receipt's At (see ReceiptOf).
	At int64
}

// A Brief is a Result without Binding and Limits: for a plan of one limit,
// all of it. With an error it is nine words, which Go returns in
// registers, where it returns a Result through memory: an in-process
// store's Take returns one (see core.Store). Its fields are the Result's,
// but for Wait, which is Retry when denied and Delay when allowed (the
// other is 0).
type Brief struct {
	Allowed   bool
	Remaining int64
	Reset     int64
	Wait      int64
	Window    int64
	Lease     int64
	At        int64
}

// Part returns limit i's part of res: res.Limits[i] for a plan of several
// limits, res's own fields for a plan of one (i is then 0).
func (res *Result) Part(i int) LimitResult {
	if len(res.Limits) > 0 {
		return res.Limits[i]
	}
	return LimitResult{Allowed: res.Allowed, Remaining: res.Remaining, Reset: res.Reset,
		Retry: res.Retry, Delay: res.Delay, Window: res.Window}
}

// BriefOf returns the Brief of res.
func BriefOf(res *Result) Brief {
	b := Brief{Allowed: res.Allowed, Remaining: res.Remaining, Reset: res.Reset, Wait: res.Retry,
		Window: res.Window, Lease: res.Lease, At: res.At}
	if res.Allowed {
		b.Wait = res.Delay
	}
	return b
}

// LimitResult is one limit's part of a Result.
type LimitResult struct {
	Allowed   bool  // this limit alone would admit the cost
	Remaining int64 // cost units left after the operation
	Reset     int64 // µs until fully replenished
	Retry     int64 // when this limit denies: µs until the cost could pass it, -1 never; else 0
	Delay     int64 // an admitted LeakyBucket cost's queueing delay, µs; else 0
	Window    int64 // the effective window, µs (see Result.Window)
}

// Step is the reference implementation of every algorithm and operation:
// stores call it (or, like the Redis store, a port that storetest holds to
// identical results). It validates op, then applies it at now (Unix µs) to
// states, one per limit of op.Plan in the same order, changing them in
// place, writes the Result to res, and returns keep: the µs until every
// state is fully replenished, after which the key's states equal fresh
// ones and may be deleted (0: already).
//
// Step reads neither op.Now nor, beyond checking it is not empty, op.Key.
// On error it changes nothing. It is a pure function of its arguments and
// the states, and allocates only, for several limits, Result.Limits when
// op.Parts has no room for them, and beyond four limits its own scratch.
func Step(op *Op, now int64, states []State, res *Result) (keep int64, err error) {
	if err := op.Validate(); err != nil {
		return 0, err
	}
	limits := op.Plan.Limits
	if len(states) != len(limits) {
		return 0, fmt.Errorf("%w: %d states for %d limits", ErrInvalidOp, len(states), len(limits))
	}
	if len(states) == 1 {
		keep = step1(op, &limits[0], now, &states[0], res)
		res.At = now
		return keep, nil
	}
	var ls []LimitResult
	if len(op.Parts) >= len(limits) {
		ls = op.Parts[:len(limits):len(limits)]
		clear(ls)
	} else {
		ls = make([]LimitResult, len(limits))
	}
	if fastPath {
		if keep, ok := fastMulti(op, limits, now, states, ls, res); ok {
			return keep, nil
		}
	}
	var sbuf [4]shape
	shapes := sbuf[:0]
	if n := len(limits); n <= len(sbuf) {
		shapes = sbuf[:n]
	} else {
		shapes = make([]shape, n)
	}
	allowed := true
	var lease int64 // the lease a Take acquires on the Concurrency limits
	for i := range shapes {
		shapes[i].Limit = limits[i]
		shapes[i].first(&states[i], op, now, &ls[i])
		allowed = allowed && ls[i].Allowed
		if limits[i].Algorithm == Concurrency {
			lease = max(lease, leaseOf(&states[i], now))
		}
	}
	// next: the lease a Take would acquire after this op (0: no
	// Concurrency limit), where an empty log's window starts.
	next := lease
	if op.Kind != Take || !allowed || op.Cost == 0 { // nothing acquired
		lease = 0
	} else {
		next = lease + 1 // this op acquires lease
	}
	for i := range shapes {
		shapes[i].lease, shapes[i].next = lease, next
		shapes[i].i = i
	}
	for i := range shapes {
		if op.Kind != Take || allowed {
			shapes[i].second(&states[i], &ls[i], op, now)
		} else {
			ls[i].Remaining, ls[i].Reset = shapes[i].report(&states[i], now)
		}
		ls[i].Window = shapes[i].window(&states[i], now, ls[i].Remaining)
		keep = max(keep, shapes[i].keep(&states[i], now, ls[i].Reset))
	}
	if !allowed { // nothing is queued unless every limit admits
		for i := range ls {
			ls[i].Delay = 0
		}
	}
	Combine(ls, res)
	res.Lease, res.At = lease, now
	return keep, nil
}

// leaseOf returns the lease a Take at now acquires on Concurrency state st
// (rolled): now, or one µs after the newest lease the key issued (B), so
// that a lease is never issued twice on a key, even after a Release or a
// Reset, and the log stays in order.
func leaseOf(st *State, now int64) int64 { return max(now, st.B+1) }

// TakeOne is Step for a Take of cost on the single limit of plan, at now,
// for a caller that has checked the op as Step would: plan has exactly
// one limit (TakeOne reads only the first), the key is not empty and cost
// is 0 or more. It is the memory store's path for nearly every decision,
// without Step's checks and dispatch; any other operation goes to Step.
// It changes st as Step does, and returns the Result's numbers as a
// Brief's fields (Wait is Retry when denied, Delay when allowed; the
// Result's At is now) and keep, in registers: a Result written to memory
// would only be read back. It calls the plan's function (chosen by
// NewPlan from oneTakes): its limit's fast path, or takeSlow. A table
// indexed by the plan, where TakeOne had a switch on the algorithm and
// the Wide flag, costs every algorithm the same few instructions (about 10
// fewer a decision of GCRA or TokenBucket, by callgrind).
// TestTakeOneEqualsStep holds it to Step's general path.
func TakeOne(plan *Plan, cost, now int64, st *State) (allowed bool, remaining, reset, wait, window, lease, keep int64) {
	return oneTakes[plan.take&7](true, cost, &plan.Limits[0], now, st)
}

// oneTake is a Take of c (take is true) on limit l's state st at now, with
// TakeOne's results.
type oneTake func(take bool, c int64, l *Limit, now int64, st *State) (allowed bool, remaining, reset, wait, window, lease, keep int64)

// oneTakes holds TakeOne's functions by Plan.take: takeSlow for a plan
// whose limit has no fast path (a log, LeakyBucket), of more than one
// limit, or not made by NewPlan (0); the fast path of its limit's
// algorithm otherwise (oneTakeOf).
var oneTakes = [8]oneTake{slowTake: takeSlow, wideTake: fastWide, gcraTake: fastGCRA, tokenTake: fastToken,
	slidingTake: fastSliding, fixedTake: fastFixed, 6: takeSlow, 7: takeSlow}

// The indices of oneTakes (fastOf's results).
const (
	slowTake uint8 = iota
	wideTake
	gcraTake
	tokenTake
	slidingTake
	fixedTake
)

// oneTakeOf returns the index in oneTakes of a plan of limits: its
// Plan.take.
func oneTakeOf(limits []Limit) uint8 {
	if len(limits) != 1 {
		return slowTake
	}
	return fastOf(&limits[0])
}

// fastOf returns the index in oneTakes of l's fast path, or 0 (takeSlow)
// when it has none: the one dispatch on the algorithm that TakeOne (by
// its plan) and fast1 share. Every fast path takes a Peek too (take
// false); takeSlow does not, and fast1 never calls it.
func fastOf(l *Limit) uint8 {
	switch {
	case (l.Algorithm == GCRA || l.Algorithm == TokenBucket) && l.Wide:
		return wideTake
	case l.Algorithm == GCRA:
		return gcraTake
	case l.Algorithm == TokenBucket:
		return tokenTake
	case l.Algorithm == SlidingWindow:
		return slidingTake
	case l.Algorithm == FixedWindow:
		return fixedTake
	}
	return slowTake
}

// takeSlow is TakeOne through the general path (take is true: a Take).
func takeSlow(_ bool, cost int64, l *Limit, now int64, st *State) (allowed bool, remaining, reset, wait, window, lease, keep int64) {
	var res Result
	keep = slow1(&Op{Kind: Take, Cost: cost}, l, now, st, &res)
	b := BriefOf(&res)
	return b.Allowed, b.Remaining, b.Reset, b.Wait, b.Window, b.Lease, keep
}

// step1 is Step for a single limit, without the bookkeeping of several.
func step1(op *Op, l *Limit, now int64, st *State, res *Result) int64 {
	if fastPath {
		if keep, ok := fast1(op, l, now, st, res); ok {
			return keep
		}
	}
	return slow1(op, l, now, st, res)
}

// fastPath turns Step's fast path on; tests turn it off to compare. TakeOne
// does not read it: its plan chose its function at NewPlan.
var fastPath = true

// slow1 is step1 through the general path.
func slow1(op *Op, l *Limit, now int64, st *State, res *Result) int64 {
	sh := shape{Limit: *l}
	var v LimitResult
	sh.first(st, op, now, &v)
	if l.Algorithm == Concurrency {
		sh.next = leaseOf(st, now)
		if op.Kind == Take && v.Allowed && op.Cost > 0 {
			sh.lease, sh.next = sh.next, sh.next+1
		}
	}
	if op.Kind != Take || v.Allowed {
		sh.second(st, &v, op, now)
	} else {
		v.Remaining, v.Reset = sh.report(st, now)
	}
	v.Window = sh.window(st, now, v.Remaining)
	*res = Result{Allowed: v.Allowed, Remaining: v.Remaining, Reset: v.Reset, Retry: v.Retry, Delay: v.Delay, Window: v.Window, Lease: sh.lease}
	return sh.keep(st, now, v.Reset)
}

// keep returns how long a store must keep st, whose limit is fully
// replenished after reset: a Concurrency state lives on while its newest
// lease is not in the past, so that a new lease never repeats one issued.
func (sh *shape) keep(st *State, now, reset int64) int64 {
	if sh.Algorithm == Concurrency {
		return max(reset, st.B+1-now)
	}
	return reset
}

// first brings st up to now and, for Take and Peek, checks the cost into v.
func (sh *shape) first(st *State, op *Op, now int64, v *LimitResult) {
	if st.Ident != sh.Ident {
		sh.fresh(st, now)
	}
	sh.roll(st, now)
	if op.Kind != Take && op.Kind != Peek {
		v.Allowed = true
		return
	}
	sh.check(st, now, op.Cost, v)
}

// second applies the change of an operation that goes ahead (an allowed
// Take, or any Charge, Refund or Reset) and reports the state after it.
// Charge, Refund and Reset then report as a Peek of cost 0 would.
func (sh *shape) second(st *State, v *LimitResult, op *Op, now int64) {
	conc := sh.Algorithm == Concurrency
	switch { // a Concurrency limit counts units in flight: no post-hoc cost
	case op.Kind == Take, op.Kind == Charge && !conc:
		sh.add(st, now, op.Cost)
	case op.Kind == Refund && !conc && op.Receipt != nil:
		sh.giveBack(st, now, op.Cost, op.Receipt, op.Receipt.reset(sh.i, len(op.Plan.Limits)))
	case op.Kind == Refund && !conc:
		sh.add(st, now, -op.Cost)
	case op.Kind == Reset:
		sh.fresh(st, now)
	case op.Kind == Release && conc:
		release(st, op.Lease)
	}
	if op.Kind >= Charge {
		sh.check(st, now, 0, v)
		v.Delay = 0
	}
	v.Remaining, v.Reset = sh.report(st, now)
}

// check sets v's verdict on cost c.
func (sh *shape) check(st *State, now, c int64, v *LimitResult) {
	ok, retry, delay := sh.need(st, now, c)
	v.Allowed, v.Retry, v.Delay = ok, 0, 0
	if ok {
		v.Delay = delay
	} else {
		v.Retry = retry
	}
}

// Combine writes to res the Result of limits whose parts are ls, in the
// plan's order, for stores that compute each limit's part themselves (the
// Redis store's Lua does): all or nothing, Allowed when every limit
// allows, the binding limit chosen as Result says. res.Limits is ls when
// there are several limits, nil for one. Combine keeps ls.
func Combine(ls []LimitResult, res *Result) {
	*res = Result{Allowed: true}
	if len(ls) == 0 {
		return
	}
	for i := range ls {
		res.Allowed = res.Allowed && ls[i].Allowed
	}
	bind := -1
	for i := range ls {
		s := &ls[i]
		if res.Allowed {
			res.Delay = max(res.Delay, s.Delay)
			if bind < 0 || s.Remaining < ls[bind].Remaining || (s.Remaining == ls[bind].Remaining && s.Reset > ls[bind].Reset) {
				bind = i
			}
		} else if !s.Allowed && (bind < 0 || laterRetry(s.Retry, ls[bind].Retry)) {
			bind = i
		}
	}
	b := &ls[bind]
	res.Binding, res.Remaining, res.Reset, res.Window = bind, b.Remaining, b.Reset, b.Window
	if !res.Allowed {
		res.Retry = b.Retry
		res.Delay = 0
	}
	if len(ls) > 1 {
		res.Limits = ls
	}
}

// laterRetry reports whether retry a is later than b, -1 (never) being the
// latest.
func laterRetry(a, b int64) bool {
	if b < 0 {
		return false
	}
	return a < 0 || a > b
}
