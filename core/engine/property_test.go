package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// event is one admitted Take of a random trace.
type event struct {
	at, cost int64 // µs, units
	delay    int64 // µs, LeakyBucket
	lease    int64 // µs, Concurrency
}

// trace is a random sequence of operations at non-decreasing instants.
type trace struct {
	at   []int64
	kind []engine.Kind
	cost []int64
}

// randomTrace returns n operations on limit l: Takes only, or a mix of
// every kind. Gaps are mostly a fraction of the emission interval P/Q,
// sometimes zero, sometimes a whole period or more.
func randomTrace(r *rand.Rand, l core.Limit, n int, mixed bool) trace {
	p := l.Period.Microseconds()
	interval := max(p/l.Quota, 1)
	capacity := l.Capacity()
	var tr trace
	now := t0us + r.Int64N(p) // anywhere in a window
	for range n {
		switch x := r.IntN(20); {
		case x < 4: // same instant
		case x < 18:
			now += r.Int64N(2 * interval)
		default:
			now += r.Int64N(3 * p)
		}
		kind := engine.Take
		if mixed {
			switch x := r.IntN(10); {
			case x == 0:
				kind = engine.Peek
			case x == 1:
				kind = engine.Charge
			case x == 2:
				kind = engine.Refund
			case x == 3 && r.IntN(10) == 0:
				kind = engine.Reset
			}
		}
		var cost int64
		switch x := r.IntN(20); {
		case x == 0:
			cost = 0
		case x == 1:
			cost = capacity + 1 + r.Int64N(3) // more than can ever pass
		case x < 5:
			cost = 1 + r.Int64N(capacity) // up to the whole capacity
		default:
			cost = 1 + r.Int64N(min(capacity, 3))
		}
		tr.at = append(tr.at, now)
		tr.kind = append(tr.kind, kind)
		tr.cost = append(tr.cost, cost)
	}
	return tr
}

// randomLimit returns a small limit of algorithm alg.
func randomLimit(r *rand.Rand, alg core.Algorithm) core.Limit {
	periods := []time.Duration{time.Second, 750 * time.Millisecond, 7 * time.Millisecond, time.Minute, 1234567 * time.Microsecond}
	l := core.Per(1+r.Int64N(12), periods[r.IntN(len(periods))]).WithAlgorithm(alg)
	switch alg {
	case core.TokenBucket, core.GCRA, core.LeakyBucket:
		if r.IntN(2) == 0 {
			l = l.WithBurst(1 + r.Int64N(2*l.Quota))
		}
	case core.BucketedWindow:
		divisors := []int64{1, 2, 3, 4, 5, 10}
		for {
			n := divisors[r.IntN(len(divisors))]
			if l.Period%(time.Duration(n)*time.Microsecond) == 0 && (l.Period/time.Duration(n))%time.Microsecond == 0 {
				l = l.WithPrecision(l.Period / time.Duration(n))
				break
			}
		}
	}
	return l
}

// TokenBucket and GCRA are the same machine in different state: on the
// same trace they decide alike in every field, Charge and Refund included.
func TestTokenBucketEqualsGCRA(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 0x70776))
		tb := randomLimit(r, core.TokenBucket)
		if seed%20 == 0 { // a wide limit now and then
			tb = core.PerDay(1_000_000_000 + r.Int64N(1000)).WithAlgorithm(core.TokenBucket)
		}
		gcra := tb.WithAlgorithm(core.GCRA)
		tr := randomTrace(r, tb, 300, seed%2 == 1)
		ts, gs := make([]engine.State, 1), make([]engine.State, 1)
		for i := range tr.at {
			d1 := mustStep(t, tb, tr.kind[i], tr.at[i], tr.cost[i], ts)
			d2 := mustStep(t, gcra, tr.kind[i], tr.at[i], tr.cost[i], gs)
			if resultOf(d1) != resultOf(d2) {
				t.Fatalf("seed %d, %v, step %d: %s(t0+%dµs, %d) = %v on the token bucket, %v on GCRA",
					seed, tb, i, opName(tr.kind[i]), tr.at[i]-t0us, tr.cost[i], resultOf(d1), resultOf(d2))
			}
		}
	}
}

// RetryAfter and ResetAfter are exact: a denied cost passes at
// now+RetryAfter and not a microsecond earlier; the limit is fully
// replenished at now+ResetAfter and not a microsecond earlier; Remaining
// is the largest cost that passes now. Checked on copies of the state.
func TestWaitsAreExact(t *testing.T) {
	for _, alg := range core.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			waits := 0 // denials with a finite RetryAfter checked
			for seed := range uint64(40) {
				r := rand.New(rand.NewPCG(seed, uint64(alg)))
				l := randomLimit(r, alg)
				tr := randomTrace(r, l, 200, true)
				states := make([]engine.State, 1)
				for i := range tr.at {
					now, kind, cost := tr.at[i], tr.kind[i], tr.cost[i]
					d := mustStep(t, l, kind, now, cost, states)
					where := fmt.Sprintf("seed %d, %v, step %d: %s(t0+%dµs, %d) = %v", seed, l, i, opName(kind), now-t0us, cost, resultOf(d))
					checkWaits(t, where, l, kind, now, cost, d, states)
					if !d.Allowed && d.RetryAfter != core.Never {
						waits++
					}
				}
			}
			if waits < 500 {
				t.Errorf("only %d denials with a finite wait were checked; the traces are too gentle", waits)
			}
		})
	}
}

func checkWaits(t *testing.T, where string, l core.Limit, kind engine.Kind, now, cost int64, d core.Decision, states []engine.State) {
	t.Helper()
	peek := func(at, c int64) core.Decision { return mustStep(t, l, engine.Peek, at, c, cloneStates(states)) }
	if kind != engine.Take && kind != engine.Peek {
		cost = 0 // Charge, Refund and Reset report as a peek of 0 would
	}
	{
		switch {
		case d.Allowed && d.RetryAfter != 0:
			t.Fatalf("%s: allowed with a RetryAfter", where)
		case !d.Allowed && cost > l.Capacity():
			if d.RetryAfter != core.Never {
				t.Fatalf("%s: a cost above the capacity must wait for ever", where)
			}
		case !d.Allowed:
			retry := d.RetryAfter.Microseconds()
			if retry <= 0 {
				t.Fatalf("%s: denied with a RetryAfter ≤ 0", where)
			}
			if !peek(now+retry, cost).Allowed {
				t.Fatalf("%s: the cost does not pass at now+RetryAfter", where)
			}
			if peek(now+retry-1, cost).Allowed {
				t.Fatalf("%s: the cost passes 1µs before now+RetryAfter", where)
			}
		}
	}
	if d.Remaining < 0 || d.Remaining > l.Capacity() {
		t.Fatalf("%s: Remaining out of [0, capacity]", where)
	}
	if p := peek(now, 0); p.Remaining != d.Remaining || p.ResetAfter != d.ResetAfter {
		t.Fatalf("%s: a peek right after reports %v", where, resultOf(p))
	}
	if d.Remaining > 0 && !peek(now, d.Remaining).Allowed {
		t.Fatalf("%s: a cost of Remaining does not pass", where)
	}
	if rem := d.Remaining + 1; rem <= l.Capacity() && peek(now, rem).Allowed {
		t.Fatalf("%s: a cost of Remaining+1 passes", where)
	}
	reset := d.ResetAfter.Microseconds()
	if full := peek(now+reset, 0); full.Remaining != fullRemaining(l) || full.ResetAfter != 0 {
		t.Fatalf("%s: not fully replenished at now+ResetAfter: %v", where, resultOf(full))
	}
	if reset > 0 {
		if p := peek(now+reset-1, 0); p.ResetAfter != time.Microsecond {
			t.Fatalf("%s: 1µs before now+ResetAfter, ResetAfter is %v, want 1µs", where, p.ResetAfter)
		}
	}
}

// fullRemaining is the Remaining of a fully replenished limit.
func fullRemaining(l core.Limit) int64 { return l.Capacity() }

// No algorithm admits more than its bound on a random trace of Takes.
func TestNeverOverAdmits(t *testing.T) {
	for _, alg := range core.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			reached := 0
			for seed := range uint64(60) {
				r := rand.New(rand.NewPCG(seed, 0xad+uint64(alg)))
				l := randomLimit(r, alg)
				tr := randomTrace(r, l, 400, false)
				states := make([]engine.State, 1)
				var admitted []event
				for i := range tr.at {
					d := mustStep(t, l, engine.Take, tr.at[i], tr.cost[i], states)
					if d.Allowed {
						admitted = append(admitted, event{at: tr.at[i], cost: tr.cost[i], delay: d.Delay.Microseconds(), lease: d.Lease})
					}
				}
				if len(admitted) == 0 {
					t.Fatalf("seed %d, %v: nothing admitted", seed, l)
				}
				if err := checkBound(l, admitted); err != nil {
					t.Fatalf("seed %d, %v: %v", seed, l, err)
				}
				// The check has teeth: the traces reach the bound, so a
				// bound one unit tighter fails on some of them.
				tight := l
				tight.Quota--
				if tight.Burst > 1 {
					tight.Burst--
				}
				if checkBound(tight, admitted) != nil {
					reached++
				}
			}
			if reached < 10 {
				t.Errorf("the bound was reached on %d of 60 traces; the traces are too gentle", reached)
			}
		})
	}
}

// checkBound checks the admitted events against the algorithm's bound.
func checkBound(l core.Limit, ev []event) error {
	p, q, b := l.Period.Microseconds(), l.Quota, l.Capacity()
	switch l.Algorithm {
	case core.FixedWindow:
		// ≤ Q in every epoch-aligned window.
		for i := range ev {
			var s int64
			for j := range ev {
				if ev[j].at/p == ev[i].at/p {
					s += ev[j].cost
				}
			}
			if s > q {
				return fmt.Errorf("%d admitted in the window of t0+%dµs", s, ev[i].at-t0us)
			}
		}
	case core.SlidingLog:
		// ≤ Q in every span (t−P, t].
		for i := range ev {
			var s int64
			for j := 0; j <= i; j++ {
				if ev[j].at > ev[i].at-p {
					s += ev[j].cost
				}
			}
			if s > q {
				return fmt.Errorf("%d admitted in the %dµs up to t0+%dµs", s, p, ev[i].at-t0us)
			}
		}
	case core.Concurrency:
		// Nothing released: ≤ Q in flight at every admission, an
		// acquisition being in flight until its lease + P.
		for i := range ev {
			var s int64
			for j := 0; j <= i; j++ {
				if ev[i].at < ev[j].lease+p {
					s += ev[j].cost
				}
			}
			if s > q {
				return fmt.Errorf("%d in flight at t0+%dµs", s, ev[i].at-t0us)
			}
		}
	case core.BucketedWindow:
		// ≤ Q in the n buckets up to every admission.
		prec := l.Precision.Microseconds()
		n := p / prec
		for i := range ev {
			var s int64
			for j := 0; j <= i; j++ {
				if ev[j].at/prec > ev[i].at/prec-n {
					s += ev[j].cost
				}
			}
			if s > q {
				return fmt.Errorf("%d admitted in the %d buckets up to t0+%dµs", s, n, ev[i].at-t0us)
			}
		}
	case core.SlidingWindow:
		// At every admission prev·(P−e) + cur·P ≤ Q·P, counted from the
		// trace; hence ≤ Q per aligned window and ≤ 2Q in any P.
		for i := range ev {
			w, e := ev[i].at/p, ev[i].at%p
			var prev, cur int64
			for j := 0; j <= i; j++ {
				switch ev[j].at / p {
				case w - 1:
					prev += ev[j].cost
				case w:
					cur += ev[j].cost
				}
			}
			if prev*(p-e)+cur*p > q*p {
				return fmt.Errorf("weighted usage %d·(P−%d) + %d·P > Q·P at t0+%dµs", prev, e, cur, ev[i].at-t0us)
			}
		}
	case core.TokenBucket, core.GCRA, core.LeakyBucket:
		// ≤ B + Q·(t_j − t_i)/P over every [t_i, t_j].
		for i := range ev {
			var s int64
			for j := i; j < len(ev); j++ {
				if s += ev[j].cost; s*p > b*p+q*(ev[j].at-ev[i].at) {
					return fmt.Errorf("%d admitted in [t0+%dµs, t0+%dµs], more than %d + %d·%dµs/%dµs", s, ev[i].at-t0us, ev[j].at-t0us, b, q, ev[j].at-ev[i].at, p)
				}
			}
		}
		if l.Algorithm != core.LeakyBucket {
			break
		}
		// Served at t + Delay in order, each cost c taking c·P/Q to leave:
		// (s_{k+1} − s_k)·Q > c_k·P − Q (the µs rounding up of Delay), and
		// no request waits longer than the queue: Delay·Q < (B−c)·P + Q.
		for k := range ev {
			if ev[k].delay*q >= (b-ev[k].cost)*p+q {
				return fmt.Errorf("delay %dµs of cost %d at t0+%dµs is longer than the queue", ev[k].delay, ev[k].cost, ev[k].at-t0us)
			}
			if k == 0 {
				continue
			}
			s0, s1 := ev[k-1].at+ev[k-1].delay, ev[k].at+ev[k].delay
			if (s1-s0)*q <= ev[k-1].cost*p-q {
				return fmt.Errorf("served at t0+%dµs and t0+%dµs: closer than %d·P/Q", s0-t0us, s1-t0us, ev[k-1].cost)
			}
		}
	}
	return nil
}
