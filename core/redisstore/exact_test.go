package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// The script's exact path (mdm and the spans of apply.lua.tmpl) on the
// extreme values Compile accepts: Quota = Burst = MaxQuota over MaxPeriod,
// and a quota of 5 or 7 over MaxPeriod (wide, with Q small: a span's
// fraction has few values), for each algorithm that can be wide. Random
// Takes, Peeks, Charges of up to DebtFactor × capacity and beyond (which
// saturate), Refunds with and without receipts, Resets, at times from the
// same µs to two periods later and now and then back: the Result and the
// stored registers (A, B, C) equal engine.Step's, field by field.
func TestLuaExactOnExtremeLimits(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	var limits []core.Limit
	for _, alg := range []core.Algorithm{core.TokenBucket, core.GCRA, core.LeakyBucket, core.SlidingWindow} {
		limits = append(limits,
			core.Per(core.MaxQuota, core.MaxPeriod).WithAlgorithm(alg),
			core.Per(core.MaxQuota-1, core.MaxPeriod-time.Microsecond).WithAlgorithm(alg),
			core.Per(7, core.MaxPeriod).WithAlgorithm(alg),
			core.Per(5, core.MaxPeriod-3*time.Microsecond).WithAlgorithm(alg))
	}
	for li, l := range limits {
		plan := planOf("", l)
		if !plan.Limits[0].Wide {
			t.Fatalf("%v is not wide", l)
		}
		capa := l.Capacity()
		period := l.Period.Microseconds()
		r := rand.New(rand.NewPCG(uint64(li), 0x1ea))
		states := make([]engine.State, 1)
		key := fmt.Sprintf("extreme %d", li)
		now := int64(1_700_000_000_000_000) + r.Int64N(period)
		var receipts []engine.Receipt
		for i := range 120 {
			switch x := r.IntN(10); {
			case x < 3:
			case x < 5:
				now += 1 + r.Int64N(3)
			case x < 8:
				now += r.Int64N(period/8 + 1)
			case x < 9:
				now += r.Int64N(2*period + 1)
			default:
				now -= r.Int64N(period/100 + 1) // a clock that stepped back
			}
			op := engine.Op{Plan: plan, Key: key, Now: now, Kind: []engine.Kind{engine.Take, engine.Take, engine.Peek, engine.Charge, engine.Refund, engine.Refund, engine.Reset}[r.IntN(7)]}
			op.Cost = []int64{0, 1, 2, capa - 1, capa, capa + 1, 1 + r.Int64N(capa), capa / 3}[r.IntN(8)]
			switch op.Kind {
			case engine.Charge:
				op.Cost = []int64{1, capa, 1 + r.Int64N(engine.DebtFactor*capa), engine.DebtFactor*capa - 1, engine.DebtFactor * capa, math.MaxInt64}[r.IntN(6)]
			case engine.Refund:
				op.Cost = []int64{1, capa, 1 + r.Int64N(engine.DebtFactor*capa), engine.DebtFactor * capa, math.MaxInt64}[r.IntN(5)]
				if len(receipts) > 0 && r.IntN(3) != 0 {
					rc := receipts[r.IntN(len(receipts))]
					if r.IntN(4) == 0 {
						rc.Span = min(r.Int64N(period), rc.At)
					}
					op.Receipt = &rc
				}
			}
			where := fmt.Sprintf("%v, op %d: %s cost %d at %d (receipt %+v)", l, i, op.Kind, op.Cost, now, op.Receipt)
			var want engine.Result
			keep, err := engine.Step(&op, now, states, &want)
			if err != nil {
				t.Fatalf("%s: Step: %v", where, err)
			}
			if keep == 0 { // replenished: the stores drop the state
				states[0] = engine.State{}
			}
			want.At = now
			got, err := s.Apply(ctx, op)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s:\n redis %+v\n Step  %+v", where, got, want)
			}
			if op.Cost > 0 && (op.Kind == engine.Take && want.Allowed || op.Kind == engine.Charge) {
				receipts = append(receipts, engine.ReceiptOf(&want, op.Cost))
			}
			// The stored registers: the key's first record, (ident high,
			// ident low, A, B, C) as '<I4I4ddd'; none once replenished.
			_, keys, _ := s.command(&op)
			blob, err := c.Get(ctx, keys[0]).Bytes()
			if err != nil {
				blob = nil // gone: the state equals a fresh one
			}
			st := states[0]
			if len(blob) < 32 {
				if st.Ident != 0 {
					t.Fatalf("%s: Redis dropped the state, Step keeps %+v", where, st)
				}
				continue
			}
			id := uint64(binary.LittleEndian.Uint32(blob))<<32 | uint64(binary.LittleEndian.Uint32(blob[4:]))
			f := func(i int) int64 { return int64(math.Float64frombits(binary.LittleEndian.Uint64(blob[8+8*i:]))) }
			if id != st.Ident || f(0) != st.A || f(1) != st.B || f(2) != st.C {
				t.Fatalf("%s: Redis stores (%#x, %d, %d, %d), Step (%#x, %d, %d, %d)", where, id, f(0), f(1), f(2), st.Ident, st.A, st.B, st.C)
			}
		}
	}
}

// TestWideLimitsAtTheEdge holds a wide limit's Takes to the exact edge on
// both scripts, specialized and generic, on either side of 2^52, where the
// specialized fast path divides at once below and calls mdm above: for
// GCRA, LeakyBucket and a wide TokenBucket of 1e9 per hour (T = 3.6 µs),
// after a full burst, k µs let exactly ⌊k·Q/P⌋ units pass; for a wide
// SlidingWindow, the previous window's prev units leave Q − ⌈prev·(P−e)/P⌉
// e µs into the next, a product past 2^53 that a double rounds to a
// multiple of P among them. One unit more is denied, the edge itself allowed,
// and then nothing passes. Each Result also equals engine.Step's, so the
// registers each Take writes are checked by the next.
func TestWideLimitsAtTheEdge(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	const t0 = int64(1_700_000_000_000_000)
	mulDiv := func(a, b, d int64) (q, r int64) { // ⌊a·b/d⌋, a·b mod d, independently of the store's
		x := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		qq, rr := new(big.Int).QuoRem(x, big.NewInt(d), new(big.Int))
		return qq.Int64(), rr.Int64()
	}
	type take struct {
		at, cost int64
		allowed  bool
	}
	var cases []struct {
		name  string
		limit core.Limit
		takes []take
	}
	add := func(name string, l core.Limit, takes ...take) {
		cases = append(cases, struct {
			name  string
			limit core.Limit
			takes []take
		}{name, l, takes})
	}
	for _, alg := range []core.Algorithm{core.GCRA, core.LeakyBucket, core.TokenBucket} {
		l := core.PerHour(1_000_000_000).WithAlgorithm(alg)
		q, p := int64(1_000_000_000), time.Hour.Microseconds()
		for _, k := range []int64{100, 36_000_001} { // the edge's cost·(P mod Q): about 2^34, and past 2^52
			edge, _ := mulDiv(k, q, p)
			add(fmt.Sprintf("%v/%dµs", alg, k), l,
				take{t0, q, true}, take{t0 + k, edge + 1, false}, take{t0 + k, edge, true}, take{t0 + k, 1, false})
		}
	}
	l := core.Per(1<<40, time.Hour) // Capacity × Period past 2^47: wide
	p := time.Hour.Microseconds()
	start := (t0/p + 1) * p // a window's start
	// prev·(P−e): about 2^41; past 2^52; and k·P + 1 past 2^53, which a
	// double rounds down to k·P, so that only an exact division finds
	// the weight k + 1 (e is found for prev: prev·e ≡ −1 mod P).
	inv := new(big.Int).ModInverse(big.NewInt(3185647), big.NewInt(p)).Int64()
	for _, pe := range [][2]int64{{1001, p/3 + 7}, {1<<39 + 12345, p/3 + 7}, {3185647, p - inv}} {
		prev, e := pe[0], pe[1]
		w, r := mulDiv(prev, p-e, p)
		if prev == 3185647 && (r != 1 || float64(prev)*float64(p-e) != float64(w)*float64(p)) {
			t.Fatalf("prev %d, e %d: prev·(P−e) = %d·P + %d, not rounded down to %d·P in a double", prev, e, w, r, w)
		}
		if r > 0 {
			w++
		}
		edge := int64(1<<40) - w
		add(fmt.Sprintf("sliding-window/prev=%d", prev), l,
			take{start + 5, prev, true}, take{start + p + e, edge + 1, false}, take{start + p + e, edge, true}, take{start + p + e, 1, false})
	}
	for _, plain := range []bool{false, true} {
		s := newStore(t, c)
		if plain {
			s.maxScripts = 0
		}
		for _, tc := range cases {
			plan := planOf("", tc.limit)
			if !plan.Limits[0].Wide {
				t.Fatalf("%v is not wide", tc.limit)
			}
			op := engine.Op{Plan: plan, Key: tc.name, Kind: engine.Take}
			if sc, _, _ := s.command(&op); (sc == generic) != plain {
				t.Fatalf("%s: runs the generic script: %v, want %v", tc.name, sc == generic, plain)
			}
			states := make([]engine.State, 1)
			for i, tk := range tc.takes {
				op.Now, op.Cost = tk.at, tk.cost
				where := fmt.Sprintf("%s (generic script: %v), take %d of %d at %d", tc.name, plain, i, tk.cost, tk.at)
				var want engine.Result
				if _, err := engine.Step(&op, tk.at, states, &want); err != nil {
					t.Fatalf("%s: Step: %v", where, err)
				}
				want.At = tk.at
				got, err := s.Apply(ctx, op)
				switch {
				case err != nil:
					t.Fatalf("%s: %v", where, err)
				case got.Allowed != tk.allowed:
					t.Fatalf("%s: allowed %v, want %v", where, got.Allowed, tk.allowed)
				case !reflect.DeepEqual(got, want):
					t.Fatalf("%s:\n redis %+v\n Step  %+v", where, got, want)
				}
			}
		}
	}
}
