package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
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
