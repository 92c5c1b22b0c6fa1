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

// Limits whose Capacity × Period passes 2^47µs (wide limits) have
// products past 2^53. These tests hold them to exact arithmetic: a
// reference model of each algorithm in rationals, with time in exact
// microseconds, runs the same operations, and the implementation decides
// exactly as it does: the same verdicts, Remaining, Retry, Delay and
// state.

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
// holds at now, by the layout State documents.
func implTokens(p engine.Limit, st engine.State, now int64) *big.Rat {
	full := new(big.Rat).Mul(rat(p.Capacity, 1), rat(p.Period, 1))
	x := new(big.Rat)
	if p.Algorithm == engine.TokenBucket && !p.Wide { // A = tokens × P at B, refilled Q per µs
		x.SetInt64(st.A)
		if el := now - st.B; el > 0 {
			x.Add(x, new(big.Rat).Mul(rat(el, 1), rat(p.Quota, 1)))
		}
		if x.Cmp(full) > 0 {
			x.Set(full)
		}
	} else { // TAT = A + B/Q; debt = Q·max(TAT − t, 0), in tokens × P
		debt := new(big.Rat).Add(rat(st.A, 1), rat(st.B, p.Quota)) // TAT
		debt.Sub(debt, rat(now, 1))
		if debt.Sign() < 0 {
			debt.SetInt64(0)
		}
		x.Sub(full, debt.Mul(debt, rat(p.Quota, 1)))
	}
	return x.Quo(x, rat(p.Period, 1))
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

// wideLimit returns a valid wide limit of algorithm alg.
func wideLimit(r *rand.Rand, alg core.Algorithm) core.Limit {
	quotas := []int64{1_000_000, 10_000_000, 123_456_789, 1_000_000_000, 1 << 40, 3 << 44, core.MaxQuota}
	periods := []time.Duration{time.Second, 1500 * time.Millisecond, time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, core.MaxPeriod, 86_400_000_001 * time.Microsecond}
	for {
		l := core.Per(quotas[r.IntN(len(quotas))], periods[r.IntN(len(periods))]).WithAlgorithm(alg)
		if r.IntN(3) == 0 {
			l.Quota = 1 + r.Int64N(l.Quota)
		}
		if alg != core.SlidingWindow && r.IntN(3) == 0 {
			l.Burst = 1 + r.Int64N(2*l.Quota)
		}
		if p, err := compile(l); err == nil && p.Wide {
			return l
		}
	}
}

// wideStep returns the next instant after now on a limit of emission
// interval iv µs and period p µs.
func wideStep(r *rand.Rand, now, iv, p int64) int64 {
	switch r.IntN(10) {
	case 0, 1:
		return now
	case 2:
		return now + 1
	case 3, 4:
		return now + 1 + r.Int64N(iv+1)
	case 5, 6:
		return now + r.Int64N(3*iv+1)
	case 7:
		return now + r.Int64N(p/4+1)
	default:
		return now + r.Int64N(2*p+1)
	}
}

// wideCost returns the cost of a Take or Peek: around what the reference
// holds (where rounding decides), the whole capacity, small, or random.
func wideCost(r *rand.Rand, capacity int64, avail *big.Rat) int64 {
	fl := floorRat(avail)
	switch r.IntN(10) {
	case 0:
		return 0
	case 1, 2:
		return capacity
	case 3, 4:
		return min(fl, capacity)
	case 5, 6:
		return min(fl+1, capacity)
	case 7:
		return 1
	default:
		return r.Int64N(capacity + 1)
	}
}

// floorRat returns ⌊x⌋, or 0 for x < 0.
func floorRat(x *big.Rat) int64 {
	if x.Sign() < 0 {
		return 0
	}
	return new(big.Int).Quo(x.Num(), x.Denom()).Int64()
}

// ceilRat returns ⌈x⌉ for x ≥ 0.
func ceilRat(x *big.Rat) int64 {
	q, m := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// Wide TokenBucket, GCRA, LeakyBucket and SlidingWindow limits decide
// exactly as exact arithmetic does: the same verdict, Remaining, Retry,
// Delay and usage after every operation.
func TestWideLimitsAreExact(t *testing.T) {
	for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA, core.LeakyBucket, core.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			var admitted, denied int
			for seed := range uint64(60) {
				r := rand.New(rand.NewPCG(seed, 0xe8ac7+uint64(alg)))
				a, d := checkWideTrace(t, r, wideLimit(r, alg), seed)
				admitted += a
				denied += d
			}
			// The traces have teeth: many Takes go through and many are
			// denied, most of them costs at the edge of what is left.
			if admitted < 1000 || denied < 500 {
				t.Errorf("%d Takes admitted, %d denied; the traces are too gentle", admitted, denied)
			}
		})
	}
}

// The example: GCRA 1e7 a day. A 1µs tick makes the two halves of
// the burst pass as the whole does.
func TestWideHalvesOfTheBurstPass(t *testing.T) {
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.LeakyBucket} {
		l := core.PerDay(10_000_000).WithAlgorithm(alg)
		if p, _ := compile(l); !p.Wide {
			t.Fatalf("%v is not wide", l)
		}
		states := make([]engine.State, 1)
		now := t0us + 123_457
		for i := range 2 {
			if d := mustStep(t, l, engine.Take, now, 5_000_000, states); !d.Allowed || d.Remaining != int64(5_000_000*(1-i)) {
				t.Fatalf("%v: take %d of 5e6 = %v, want allowed with %d left", l, i+1, resultOf(d), 5_000_000*(1-i))
			}
		}
		// Empty: one token takes 8.64ms.
		if d := mustStep(t, l, engine.Take, now+8639, 1, states); d.Allowed || d.RetryAfter != time.Microsecond {
			t.Fatalf("%v: a token 8639µs later = %v, want denied for 1µs", l, resultOf(d))
		}
		if d := mustStep(t, l, engine.Take, now+8640, 1, states); !d.Allowed {
			t.Fatalf("%v: a token 8640µs later = %v, want allowed", l, resultOf(d))
		}
	}
	checkWideTrace(t, rand.New(rand.NewPCG(7, 7)), core.PerDay(10_000_000).WithAlgorithm(core.GCRA), 7)
}

// checkWideTrace runs a random trace on l beside the reference and checks
// every step. It returns how many Takes were admitted and denied.
func checkWideTrace(t *testing.T, r *rand.Rand, l core.Limit, seed uint64) (admitted, denied int) {
	t.Helper()
	p, err := compile(l)
	if err != nil {
		t.Fatal(err)
	}
	period, capacity := l.Period.Microseconds(), l.Capacity()
	iv := max(period/l.Quota, 1) // emission interval, µs
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
		now = wideStep(r, now, iv, period)
		var avail *big.Rat // what the reference has left, to aim costs at
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
			cost = wideCost(r, capacity, avail)
		case engine.Charge, engine.Refund:
			cost = []int64{1, max(l.Quota/1000, 1), 1 + r.Int64N(capacity), capacity, math.MaxInt64}[r.IntN(5)]
		}
		d := mustStep(t, l, kind, now, cost, states)
		where := fmt.Sprintf("seed %d, %v, step %d: %s(t0+%dµs, %d) = %v", seed, l, i, opName(kind), now-t0us, cost, resultOf(d))

		if kind == engine.Take || kind == engine.Peek {
			exact := refAdmits(bucket, window, now, cost)
			if d.Allowed != exact {
				t.Fatalf("%s, but exact arithmetic decides %v", where, exact)
			}
			if !d.Allowed && cost <= capacity {
				// Retry: the first µs at which exact arithmetic admits.
				retry := d.RetryAfter.Microseconds()
				if retry < 1 || !refAdmitsLater(bucket, window, now+retry, cost) || refAdmitsLater(bucket, window, now+retry-1, cost) {
					t.Fatalf("%s: retry %dµs is not the first µs exact arithmetic admits at", where, retry)
				}
			}
			if d.Allowed && l.Algorithm == core.LeakyBucket {
				// Served when exact arithmetic serves it, to the µs: once
				// the debt (capacity − tokens) drains at Q per P.
				wait := new(big.Rat).Sub(rat(capacity, 1), bucket.tokens)
				wait.Mul(wait, rat(period, l.Quota))
				if want := ceilRat(wait); d.Delay.Microseconds() != want {
					t.Fatalf("%s, served after %v, exactly after %dµs", where, d.Delay, want)
				}
			}
		}
		// The same operation on the reference.
		switch {
		case kind == engine.Take && d.Allowed:
			admitted++
			refAdd(bucket, window, cost)
		case kind == engine.Take:
			denied++
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
		// Remaining is what exact arithmetic has left, floored.
		var left *big.Rat
		if bucket != nil {
			left = bucket.tokens
		} else {
			left = window.room(now)
		}
		if want := min(floorRat(left), capacity); d.Remaining != want {
			t.Fatalf("%s: Remaining %d, exact arithmetic %s", where, d.Remaining, left.FloatString(6))
		}
		// The state holds what the reference holds.
		if bucket != nil {
			if got := implTokens(p, states[0], now); got.Cmp(bucket.tokens) != 0 {
				t.Fatalf("%s: the state holds %s tokens, exact arithmetic %s", where, got.FloatString(6), bucket.tokens.FloatString(6))
			}
		} else if st := states[0]; st.B != window.prev || st.C != window.cur {
			t.Fatalf("%s: the state counts prev %d, cur %d; exact arithmetic %d, %d", where, st.B, st.C, window.prev, window.cur)
		}
	}
	return admitted, denied
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

// refAdmitsLater reports whether the reference admits c at later, had
// nothing happened since.
func refAdmitsLater(b *refBucket, w *refWindow, later, c int64) bool {
	if b != nil {
		x := *b
		x.tokens = new(big.Rat).Set(b.tokens)
		x.at(later)
		return x.admits(c)
	}
	x := *w
	x.at(later)
	return x.admits(later, c)
}
