package engine_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// Limits whose Capacity × Period passes 2^47µs compute in a coarse tick.
// These tests hold them to exact arithmetic: a reference model of each
// algorithm in rationals, with time in exact microseconds and no tick,
// runs the operations the implementation admits, and the implementation
// may deny more than it, never admit more or owe less.

// rat returns a/b as a new big.Rat.
func rat(a, b int64) *big.Rat { return big.NewRat(a, b) }

// refBucket is the exact token bucket: TokenBucket, GCRA and LeakyBucket
// decide as this one machine. Tokens refill at Q per P, continuously, up to
// the capacity; usage (capacity − tokens) saturates at DebtFactor ×
// capacity.
type refBucket struct {
	q, p, cap int64
	tokens    *big.Rat
	last      int64 // µs
}

func newRefBucket(l core.Limit, now int64) *refBucket {
	return &refBucket{q: l.Quota, p: l.Period.Microseconds(), cap: l.Capacity(), tokens: rat(l.Capacity(), 1), last: now}
}

// at refills the bucket up to now.
func (r *refBucket) at(now int64) {
	if now <= r.last {
		return
	}
	r.tokens.Add(r.tokens, new(big.Rat).Mul(rat(now-r.last, 1), rat(r.q, r.p)))
	if full := rat(r.cap, 1); r.tokens.Cmp(full) > 0 {
		r.tokens = full
	}
	r.last = now
}

// admits reports whether cost c passes now.
func (r *refBucket) admits(c int64) bool { return c <= r.cap && r.tokens.Cmp(rat(c, 1)) >= 0 }

// add takes d units (a Take or a Charge), saturating usage at
// DebtFactor × capacity, or gives -d back (a Refund), up to full.
func (r *refBucket) add(d int64) {
	if d >= 0 {
		r.tokens.Sub(r.tokens, rat(d, 1))
		if floor := rat(r.cap-core.DebtFactor*r.cap, 1); r.tokens.Cmp(floor) < 0 {
			r.tokens = floor
		}
		return
	}
	r.tokens.Sub(r.tokens, rat(d, 1))
	if full := rat(r.cap, 1); r.tokens.Cmp(full) > 0 {
		r.tokens = full
	}
}

// implTokens returns the tokens a TokenBucket, GCRA or LeakyBucket state
// holds at now, by the layout State documents, continuously (no tick): what
// the state will count once time reaches a tick boundary.
func implTokens(p engine.Limit, st engine.State, now int64) *big.Rat {
	full := rat(p.Capacity*p.PeriodTicks, 1)
	t := rat(now, p.Tick) // now in ticks, exactly
	x := new(big.Rat)
	switch p.Algorithm {
	case engine.TokenBucket: // A = tokens × P in ticks at tick B, refilled Q per tick
		x.SetInt64(st.A)
		if el := new(big.Rat).Sub(t, rat(st.B, 1)); el.Sign() > 0 {
			x.Add(x, el.Mul(el, rat(p.Quota, 1)))
		}
		if x.Cmp(full) > 0 {
			x.Set(full)
		}
	default: // TAT = A + B/Q ticks; debt = Q·max(TAT − t, 0), in tokens × P
		debt := new(big.Rat).Add(rat(st.A, 1), rat(st.B, p.Quota)) // TAT
		debt.Sub(debt, t)
		if debt.Sign() < 0 {
			debt.SetInt64(0)
		}
		x.Sub(full, debt.Mul(debt, rat(p.Quota, 1)))
	}
	return x.Quo(x, rat(p.PeriodTicks, 1))
}

// refWindow is the exact sliding window counter: with e the µs elapsed in
// the current window, cost c passes when prev·(P−e) + (cur+c)·P ≤ Q·P.
type refWindow struct {
	q, p         int64
	w, prev, cur int64 // window number ⌊t/P⌋ and the counts
}

func newRefWindow(l core.Limit, now int64) *refWindow {
	p := l.Period.Microseconds()
	return &refWindow{q: l.Quota, p: p, w: floorDivTest(now, p)}
}

func (r *refWindow) at(now int64) {
	switch w := floorDivTest(now, r.p); {
	case w == r.w+1:
		r.w, r.prev, r.cur = w, r.cur, 0
	case w > r.w+1:
		r.w, r.prev, r.cur = w, 0, 0
	}
}

// excess returns prev·(P−e) + (cur+c)·P − Q·P at now, exactly.
func (r *refWindow) excess(now, c int64) *big.Int {
	e := now - r.w*r.p
	x := new(big.Int).Mul(big.NewInt(r.prev), big.NewInt(r.p-e))
	y := new(big.Int).Add(big.NewInt(r.cur), big.NewInt(c))
	x.Add(x, y.Mul(y, big.NewInt(r.p)))
	return x.Sub(x, new(big.Int).Mul(big.NewInt(r.q), big.NewInt(r.p)))
}

// room returns the largest cost that passes now, as a fraction: Q − cur −
// prev·(P−e)/P.
func (r *refWindow) room(now int64) *big.Rat {
	x := new(big.Rat).SetInt(r.excess(now, 0))
	return x.Neg(x.Quo(x, rat(r.p, 1)))
}

func (r *refWindow) admits(now, c int64) bool { return c <= r.q && r.excess(now, c).Sign() <= 0 }

func (r *refWindow) add(d int64) {
	m := core.DebtFactor * r.q
	if d >= 0 {
		r.cur = min(r.cur+min(d, m), m)
		return
	}
	x := min(r.cur, -max(d, -2*m))
	r.cur -= x
	r.prev = max(r.prev-(-max(d, -2*m)-x), 0)
}

func floorDivTest(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// coarseLimit returns a valid limit of algorithm alg that computes in a
// tick coarser than 1µs.
func coarseLimit(r *rand.Rand, alg core.Algorithm) core.Limit {
	quotas := []int64{1_000_000, 10_000_000, 123_456_789, 1_000_000_000, 1 << 40, 3 << 44, core.MaxQuota}
	periods := []time.Duration{time.Second, 1500 * time.Millisecond, time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, core.MaxPeriod}
	for {
		l := core.Per(quotas[r.IntN(len(quotas))], periods[r.IntN(len(periods))]).WithAlgorithm(alg)
		if r.IntN(3) == 0 {
			l.Quota = 1 + r.Int64N(l.Quota)
		}
		if alg != core.SlidingWindow && r.IntN(3) == 0 {
			l.Burst = 1 + r.Int64N(2*l.Quota)
		}
		if p, err := compile(l); err == nil && p.Tick > 1 {
			return l
		}
	}
}

// coarseStep returns the next instant after now on a limit of tick µs and
// emission interval iv µs: often near a tick boundary, where rounding
// time to ticks matters.
func coarseStep(r *rand.Rand, now, tick, iv, p int64) int64 {
	next := (floorDivTest(now, tick) + 1) * tick // the next tick boundary
	switch r.IntN(12) {
	case 0, 1:
		return now
	case 2:
		return now + 1
	case 3:
		return next - 1
	case 4, 5:
		return next
	case 6:
		return next + r.Int64N(tick)
	case 7:
		return now + r.Int64N(tick)
	case 8:
		return now + r.Int64N(3*iv+1)
	case 9:
		return now + r.Int64N(p/4+1)
	case 10:
		return next + r.Int64N(3)*tick - 1
	default:
		return now + r.Int64N(2*p+1)
	}
}

// coarseCost returns the cost of a Take or Peek: around what the reference
// holds (where rounding decides), the whole capacity, small, or random.
func coarseCost(r *rand.Rand, capacity int64, avail *big.Rat, perTick int64) int64 {
	fl := new(big.Int).Quo(avail.Num(), avail.Denom()).Int64() // ⌊avail⌋ for avail ≥ 0
	if avail.Sign() < 0 {
		fl = 0
	}
	switch r.IntN(10) {
	case 0:
		return 0
	case 1, 2:
		return capacity
	case 3:
		return min(fl, capacity)
	case 4:
		return min(fl+1, capacity)
	case 5:
		return min(fl+1+r.Int64N(perTick+1), capacity)
	case 6:
		return 1
	case 7:
		return 1 + r.Int64N(perTick+1)
	default:
		return r.Int64N(capacity + 1)
	}
}

// On a coarse tick, TokenBucket, GCRA, LeakyBucket and SlidingWindow never
// admit what exact arithmetic denies, and never owe less than it does after
// the same operations. They deny more only by what the part of a tick since
// the last tick boundary would change (its refill, or the previous
// window's weight), and a rated limit owes more only by rounding: less than
// one unit of tokens × P (in ticks), 1/PeriodTicks of a token.
func TestCoarseTicksNeverMorePermissive(t *testing.T) {
	for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA, core.LeakyBucket, core.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			var near, admitted int
			for seed := range uint64(60) {
				r := rand.New(rand.NewPCG(seed, 0xe8ac7+uint64(alg)))
				n, a := checkCoarseTrace(t, r, coarseLimit(r, alg), seed)
				near += n
				admitted += a
			}
			// The traces have teeth: many decisions fall where exact
			// arithmetic and the tick boundary before now disagree.
			if near < 50 || admitted < 1000 {
				t.Errorf("%d decisions within a tick of the boundary, %d Takes admitted; the traces are too gentle", near, admitted)
			}
		})
	}
}

// checkCoarseTrace runs a random trace on l beside the reference and
// checks every step. It returns how many Takes and Peeks were decided
// where the reference at now and at the tick boundary before now
// disagree, and how many Takes were admitted.
func checkCoarseTrace(t *testing.T, r *rand.Rand, l core.Limit, seed uint64) (near, admitted int) {
	t.Helper()
	p, err := compile(l)
	if err != nil {
		t.Fatal(err)
	}
	period, capacity := l.Period.Microseconds(), l.Capacity()
	iv := max(period/l.Quota, 1)                                               // emission interval, µs
	perTick := max(int64(float64(l.Quota)*float64(p.Tick)/float64(period)), 1) // units refilled per tick, about
	now := t0us + r.Int64N(period)
	states := make([]engine.State, 1)
	var bucket *refBucket
	var window *refWindow
	if l.Algorithm == core.SlidingWindow {
		window = newRefWindow(l, now)
	} else {
		bucket = newRefBucket(l, now)
	}
	for i := range 150 {
		now = coarseStep(r, now, p.Tick, iv, period)
		since := now - floorDivTest(now, p.Tick)*p.Tick // µs since the last tick boundary
		var avail *big.Rat                              // about what the reference has left, to aim costs at
		if bucket != nil {
			bucket.at(now)
			avail = bucket.tokens
		} else {
			window.at(now)
			avail = window.room(now)
		}
		kind := engine.Take
		switch x := r.IntN(20); {
		case x < 2:
			kind = engine.Peek
		case x < 5:
			kind = engine.Charge
		case x < 7:
			kind = engine.Refund
		case x < 8 && r.IntN(4) == 0:
			kind = engine.Reset
		}
		var cost int64
		switch kind {
		case engine.Take, engine.Peek:
			cost = coarseCost(r, capacity, avail, perTick)
		case engine.Charge, engine.Refund:
			cost = []int64{1, perTick, 1 + r.Int64N(capacity), capacity, math.MaxInt64}[r.IntN(5)]
		}
		d := mustStep(t, l, kind, now, cost, states)
		where := fmt.Sprintf("seed %d, %v (tick %dµs), step %d: %s(t0+%dµs, %d) = %v", seed, l, p.Tick, i, opName(kind), now-t0us, cost, resultOf(d))

		if kind == engine.Take || kind == engine.Peek {
			// exact: the reference admits now; early: it admits even
			// without the part of a tick since the boundary before now
			// (and, for a bucket, without the state's rounding).
			var exact, early bool
			if bucket != nil {
				exact = bucket.admits(cost)
				lag := new(big.Rat).Mul(rat(since, 1), rat(l.Quota, period))
				lag.Add(lag, rat(1, p.PeriodTicks))
				early = cost <= capacity && new(big.Rat).Sub(bucket.tokens, lag).Cmp(rat(cost, 1)) >= 0
			} else {
				exact = window.admits(now, cost)
				early = window.admits(now-since, cost)
			}
			switch {
			case d.Allowed && !exact:
				t.Fatalf("%s, but exact arithmetic denies it", where)
			case !d.Allowed && early:
				t.Fatalf("%s, but exact arithmetic admits it even a tick earlier", where)
			case window != nil && d.Allowed != early:
				t.Fatalf("%s, but exact arithmetic at the tick boundary before now decides %v", where, early)
			}
			if exact != early {
				near++
			}
			if d.Allowed && l.Algorithm == core.LeakyBucket && bucket.tokens.Cmp(rat(capacity, 1)) < 0 {
				// Served no earlier than exact arithmetic serves it:
				// once the debt (capacity − tokens) drains at Q per P.
				wait := new(big.Rat).Sub(rat(capacity, 1), bucket.tokens)
				wait.Mul(wait, rat(period, l.Quota))
				if rat(d.Delay.Microseconds(), 1).Cmp(wait) < 0 {
					t.Fatalf("%s, served before the exact delay of %sµs", where, wait.FloatString(3))
				}
			}
		}
		// The same operation on the reference.
		switch {
		case kind == engine.Take && d.Allowed:
			admitted++
			refAdd(bucket, window, cost)
		case kind == engine.Charge:
			refAdd(bucket, window, cost)
		case kind == engine.Refund:
			refAdd(bucket, window, -cost)
		case kind == engine.Reset:
			if bucket != nil {
				bucket.tokens = rat(capacity, 1)
			} else {
				window.prev, window.cur = 0, 0
			}
		}
		// Remaining never promises what exact arithmetic would deny.
		if d.Remaining > 0 && !refAdmits(bucket, window, now, d.Remaining) {
			t.Fatalf("%s: Remaining %d, but exact arithmetic denies that cost", where, d.Remaining)
		}
		// The state never owes less than the reference, and more only by
		// rounding. (SlidingWindow counts units, not time: it owes the same.)
		if bucket != nil {
			got := implTokens(p, states[0], now)
			if got.Cmp(bucket.tokens) > 0 {
				t.Fatalf("%s: the state holds %s tokens, exact arithmetic %s", where, got.FloatString(6), bucket.tokens.FloatString(6))
			}
			if gap := new(big.Rat).Sub(bucket.tokens, got); gap.Cmp(rat(1, p.PeriodTicks)) >= 0 {
				t.Fatalf("%s: the state holds %s tokens, exact arithmetic %s: a rounding unit (1/%d) or more apart", where, got.FloatString(6), bucket.tokens.FloatString(6), p.PeriodTicks)
			}
		} else if st := states[0]; st.B != window.prev || st.C != window.cur {
			t.Fatalf("%s: the state counts prev %d, cur %d; exact arithmetic %d, %d", where, st.B, st.C, window.prev, window.cur)
		}
	}
	return near, admitted
}

func refAdd(b *refBucket, w *refWindow, d int64) {
	if b != nil {
		b.add(d)
	} else {
		w.add(d)
	}
}

func refAdmits(b *refBucket, w *refWindow, now, c int64) bool {
	if b != nil {
		return b.admits(c)
	}
	return w.admits(now, c)
}

// TokenBucket and GCRA stay one machine on a coarse tick: the rounding of a
// charge made between tick boundaries, and the saturation of a huge one,
// leave them deciding alike in every field.
func TestTokenBucketEqualsGCRAOnCoarseTicks(t *testing.T) {
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 0x6c7a))
		tb := coarseLimit(r, core.TokenBucket)
		gcra := tb.WithAlgorithm(core.GCRA)
		p, err := compile(tb)
		if err != nil {
			t.Fatal(err)
		}
		period := tb.Period.Microseconds()
		now := t0us + r.Int64N(period)
		ts, gs := make([]engine.State, 1), make([]engine.State, 1)
		for i := range 200 {
			now = coarseStep(r, now, p.Tick, max(period/tb.Quota, 1), period)
			kind := []engine.Kind{engine.Take, engine.Take, engine.Take, engine.Peek, engine.Charge, engine.Refund, engine.Reset}[r.IntN(7)]
			cost := []int64{0, 1, 1 + r.Int64N(tb.Capacity()), tb.Capacity(), tb.Capacity() + 1, math.MaxInt64}[r.IntN(6)]
			d1 := mustStep(t, tb, kind, now, cost, ts)
			d2 := mustStep(t, gcra, kind, now, cost, gs)
			if resultOf(d1) != resultOf(d2) {
				t.Fatalf("seed %d, %v, step %d: %s(t0+%dµs, %d) = %v on the token bucket, %v on GCRA",
					seed, tb, i, opName(kind), now-t0us, cost, resultOf(d1), resultOf(d2))
			}
		}
	}
}
