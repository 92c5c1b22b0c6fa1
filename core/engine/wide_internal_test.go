package engine

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The wide path's arithmetic (wide.go, in 128 bits) equals gcra.go's and
// credit's on limits small enough for both: the same verdicts, waits,
// delays, reports, states after a charge or a refund, and credits.
func TestWideEqualsNarrow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for trial := range 30000 {
		spec := Spec{Algorithm: []Algorithm{GCRA, LeakyBucket, TokenBucket}[r.IntN(3)],
			Quota: 1 + r.Int64N([]int64{3, 1000, 1 << 30}[r.IntN(3)]), Period: time.Duration(1+r.Int64N(1e7)) * time.Microsecond}
		if r.IntN(2) == 0 {
			spec.Burst = 1 + r.Int64N(3*spec.Quota)
		}
		l, err := Compile(spec)
		if err != nil || l.Wide {
			continue
		}
		if l.Algorithm == TokenBucket { // its narrow registers differ: compare GCRA's
			l.Algorithm = GCRA
		}
		checked++
		now := int64(1_700_000_000_000_000) + r.Int64N(1<<40)
		narrow := shape{Limit: l, tt: now}
		wide := narrow
		wide.Wide = true
		m := narrow.debtCap()
		tat := now - r.Int64N(l.Period) + r.Int64N((m+2)*l.Period/l.Quota+2)
		st := State{Ident: l.Ident, A: tat, B: r.Int64N(l.Quota)}
		gcraRoll(&narrow, &st, now)
		c := r.Int64N(l.Capacity + 1)
		ok1, re1, de1 := gcraNeed(&narrow, &st, now, c)
		ok2, re2, de2 := wideNeed(&wide, &st, c)
		if ok1 != ok2 || re1 != re2 || de1 != de2 {
			t.Fatalf("trial %d, %+v, state %+v: need(%d) narrow (%v, %d, %d), wide (%v, %d, %d)", trial, l, st, c, ok1, re1, de1, ok2, re2, de2)
		}
		rem1, reset1 := gcraReport(&narrow, &st, now)
		rem2, reset2 := wideReport(&wide, &st)
		if rem1 != rem2 || reset1 != reset2 {
			t.Fatalf("trial %d, %+v, state %+v: report narrow (%d, %d), wide (%d, %d)", trial, l, st, rem1, reset1, rem2, reset2)
		}
		d := []int64{1, c, m, -1, -c, -m, r.Int64N(2*m+1) - m}[r.IntN(7)]
		s1, s2 := st, st
		gcraAdd(&narrow, &s1, d)
		gcraAdd(&wide, &s2, d)
		if s1.A != s2.A || s1.B != s2.B {
			t.Fatalf("trial %d, %+v, state %+v: add(%d) narrow %+v, wide %+v", trial, l, st, d, s1, s2)
		}
		back := 1 + r.Int64N(m)
		lo := now - r.Int64N(3*l.Period)
		reset := []int64{-1, 0, r.Int64N(3 * l.Period), r.Int64N(m*l.Period/l.Quota + 2)}[r.IntN(4)]
		x1 := narrow.credit(now, back, lo, reset)
		x2 := wide.wideCredit(back, lo, reset)
		if x2 != (u128{0, uint64(x1)}) {
			t.Fatalf("trial %d, %+v: credit(%d, lo %d, reset %d) narrow %d, wide %+v", trial, l, back, lo, reset, x1, x2)
		}
	}
	if checked < 10000 {
		t.Errorf("only %d limits checked", checked)
	}
}
