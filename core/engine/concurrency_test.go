package engine_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// concModel is the definition of a Concurrency limit, written plainly: the
// acquisitions in flight, each live until released or until lease + P.
type concModel struct {
	q, p   int64
	live   []acquisition
	newest int64
}

type acquisition struct{ lease, cost int64 }

func (m *concModel) roll(now int64) {
	m.live = slices.DeleteFunc(m.live, func(a acquisition) bool { return now >= a.lease+m.p })
}

func (m *concModel) inFlight() (s int64) {
	for _, a := range m.live {
		s += a.cost
	}
	return s
}

// window is the effective window after a step, as core.Decision defines
// it: had the key used all it has left at once, one more unit would pass
// after it. With nothing left, when one unit's retry ends; else when the
// oldest acquisition in flight ends, or, with none in flight, when the
// acquisition of what is left would (at the lease it would get).
func (m *concModel) window(now, remaining int64) int64 {
	if remaining == 0 {
		excess := m.inFlight() + 1 - m.q
		for _, a := range m.live {
			if excess -= a.cost; excess <= 0 {
				return a.lease + m.p - now
			}
		}
	}
	if len(m.live) > 0 {
		return m.live[0].lease + m.p - now
	}
	return max(now, m.newest+1) + m.p - now
}

// step returns what the model decides: allowed, remaining, the retry of a
// denial (-1: never), the reset, and the lease of an allowed Take.
func (m *concModel) step(kind engine.Kind, now, cost, lease int64) (ok bool, remaining, retry, reset, newLease int64) {
	m.roll(now)
	used := m.inFlight()
	switch kind {
	case engine.Take, engine.Peek:
		ok = used+cost <= m.q
		if !ok {
			retry = -1
			if cost <= m.q {
				excess := used + cost - m.q
				for _, a := range m.live {
					if excess -= a.cost; excess <= 0 {
						retry = a.lease + m.p - now
						break
					}
				}
			}
		}
		if ok && kind == engine.Take && cost > 0 {
			newLease = max(now, m.newest+1)
			m.newest = newLease
			m.live = append(m.live, acquisition{newLease, cost})
		}
	case engine.Release:
		m.live = slices.DeleteFunc(m.live, func(a acquisition) bool { return a.lease == lease })
		ok = true
	case engine.Reset:
		m.live = nil
		ok = true
	default: // Charge and Refund leave a Concurrency limit alone
		ok = used <= m.q
	}
	used = m.inFlight()
	remaining = max(m.q-used, 0)
	if n := len(m.live); n > 0 {
		reset = m.live[n-1].lease + m.p - now
	}
	return ok, remaining, retry, reset, newLease
}

// A Concurrency limit decides as its definition says on random traces of
// takes, releases (of live, released, expired and unknown leases), peeks,
// charges, refunds and resets, and never issues a lease twice on a key.
func TestConcurrencyMatchesModel(t *testing.T) {
	periods := []time.Duration{time.Second, 30 * time.Millisecond, time.Minute}
	for seed := range uint64(150) {
		r := rand.New(rand.NewPCG(seed, 0xc0c))
		l := core.Per(1+r.Int64N(8), periods[r.IntN(len(periods))]).WithAlgorithm(core.Concurrency)
		p := l.Period.Microseconds()
		m := concModel{q: l.Quota, p: p}
		states := make([]engine.State, 1)
		issued := map[int64]bool{}
		var leases []int64
		now := t0us + r.Int64N(p)
		denied, released := 0, 0
		var forgetAt int64
		for i := range 300 {
			switch x := r.IntN(20); {
			case x < 6: // the same µs: leases must still differ
			case x < 19:
				now += r.Int64N(p / 4)
			default:
				now += r.Int64N(2 * p)
			}
			// A store may forget the key once keep has passed: it must then
			// decide as if it had not, leases included.
			if now >= forgetAt {
				states[0] = engine.State{}
			}
			kind, cost, lease := engine.Take, int64(1+r.IntN(3)), int64(0)
			switch x := r.IntN(20); {
			case x < 8 && len(leases) > 0:
				kind, cost, lease = engine.Release, 0, leases[r.IntN(len(leases))]
			case x == 8:
				kind, cost, lease = engine.Release, 0, now+r.Int64N(p)
			case x == 9:
				kind = engine.Peek
			case x == 10:
				kind = engine.Charge
			case x == 11:
				kind = engine.Refund
			case x == 12 && r.IntN(4) == 0:
				kind, cost = engine.Reset, 0
			case x == 13:
				cost = l.Quota + 1
			case x == 14:
				cost = 0
			}
			o := op{Kind: kind, Key: "k", Limits: []core.Limit{l}, Cost: cost, Lease: lease}
			d, keep, err := step(&o, now, states)
			if err != nil {
				t.Fatalf("seed %d, step %d: %v", seed, i, err)
			}
			ok, rem, retry, reset, wantLease := m.step(kind, now, cost, lease)
			want := core.Decision{Allowed: ok, Remaining: rem, ResetAfter: time.Duration(reset) * time.Microsecond, Lease: wantLease,
				EffectiveWindow: time.Duration(m.window(now, rem)) * time.Microsecond}
			if !ok {
				want.RetryAfter = core.Never
				if retry >= 0 {
					want.RetryAfter = time.Duration(retry) * time.Microsecond
				}
			}
			if d.Allowed != want.Allowed || d.Remaining != want.Remaining || d.ResetAfter != want.ResetAfter ||
				d.RetryAfter != want.RetryAfter || d.Lease != want.Lease || d.EffectiveWindow != want.EffectiveWindow {
				t.Fatalf("seed %d, %v, step %d: %s(t0+%dµs, cost %d, lease %d) = %+v, window %v\nwant %+v, window %v",
					seed, l, i, opName(kind), now-t0us, cost, lease, resultOf(d), d.EffectiveWindow, resultOf(want), want.EffectiveWindow)
			}
			if d.Lease != wantLease {
				t.Fatalf("seed %d, step %d: lease %d, want %d", seed, i, d.Lease, wantLease)
			}
			if kind == engine.Take && d.Allowed && cost > 0 {
				if issued[d.Lease] {
					t.Fatalf("seed %d, step %d: lease %d issued twice", seed, i, d.Lease)
				}
				issued[d.Lease] = true
				leases = append(leases, d.Lease)
			}
			if kind == engine.Take && !d.Allowed && cost <= l.Quota {
				denied++
			}
			if kind == engine.Release {
				released++
			}
			forgetAt = now + keep.Microseconds()
		}
		if denied == 0 || released == 0 {
			t.Fatalf("seed %d: %d denials and %d releases: the trace does not exercise the limit", seed, denied, released)
		}
	}
}

// A Concurrency limit joins a multi-limit decision: all or nothing, and a
// Release frees the units in flight while the rate limit keeps its count.
func TestConcurrencyWithRateLimit(t *testing.T) {
	conc := core.Per(2, time.Minute).WithAlgorithm(core.Concurrency)
	conc.Name = "in-flight"
	rate := core.PerSecond(3)
	rate.Name = "rate"
	limits := []core.Limit{rate, conc}
	states := make([]engine.State, 2)
	now := at(0)
	take := func(cost int64) core.Decision {
		d, _, err := step(&op{Kind: engine.Take, Key: "k", Limits: limits, Cost: cost}, now, states)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	release := func(lease int64) core.Decision {
		d, _, err := step(&op{Kind: engine.Release, Key: "k", Limits: limits, Lease: lease}, now, states)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := take(1), take(1)
	if !a.Allowed || !b.Allowed || a.Lease == 0 || b.Lease == 0 || a.Lease == b.Lease {
		t.Fatalf("two takes = %v lease %d, %v lease %d; want both allowed with distinct leases", resultOf(a), a.Lease, resultOf(b), b.Lease)
	}
	d := take(1)
	if d.Allowed || d.Limit.Name != "in-flight" || d.Lease != 0 {
		t.Fatalf("a third take in flight = %v (binding %q, lease %d); want denied by in-flight, no lease", resultOf(d), d.Limit.Name, d.Lease)
	}
	if d.States[0].Remaining != 1 {
		t.Fatalf("the denied take changed the rate limit: %d remaining, want 1", d.States[0].Remaining)
	}
	if r := release(a.Lease); !r.Allowed || r.States[1].Remaining != 1 || r.States[0].Remaining != 1 {
		t.Fatalf("release = %+v; want 1 in flight freed and the rate limit untouched", r.States)
	}
	if r := release(a.Lease); r.States[1].Remaining != 1 {
		t.Fatalf("a second release of one lease freed more: %+v", r.States)
	}
	c := take(1)
	if !c.Allowed || c.Lease <= b.Lease {
		t.Fatalf("take after release = %v lease %d; want allowed with a lease after %d", resultOf(c), c.Lease, b.Lease)
	}
	// Now the rate limit binds: 3 per second taken, 1 in flight free after
	// a release, and the fourth take is denied by the rate, acquiring nothing.
	release(b.Lease)
	d = take(1)
	if d.Allowed || d.Limit.Name != "rate" || d.States[1].Remaining != 1 {
		t.Fatalf("a fourth take in a second = %v (binding %q, in flight %+v); want denied by the rate, nothing acquired", resultOf(d), d.Limit.Name, d.States[1])
	}
	// A lease is invalid for Release only when it is not positive.
	if _, _, err := step(&op{Kind: engine.Release, Key: "k", Limits: limits}, now, states); !errors.Is(err, core.ErrInvalidOp) {
		t.Fatalf("release of lease 0: err %v, want ErrInvalidOp", err)
	}
}
