package redisstore

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/tollgate/tollgate/core"
)

// The oracles of the leased fleet: what the guarantee of core/lease
// (doc.go) implies for the admissions of a fleet, in wall-clock time.
// Replayed one by one at the instants the fleet admitted them, every
// admission passes one exact store, which starts empty (a fresh prefix).
// An admission's instant lies in [t0, t1], the instants (Unix µs) just
// before and just after its call, so it counts in an interval only when
// [t0, t1] lies inside it: every count below is at most the true one,
// and every bound the exact store keeps holds of it. An admission whose
// call straddles a boundary is left out of the intervals it straddles (a
// round trip in flight across it): not evidence against the guarantee,
// only weaker evidence for it, so the oracles report how many there are.

// fleetCalls returns the admissions of procs, each (t0, t1).
func fleetCalls(procs []*fleetProc) [][2]int64 {
	var calls [][2]int64
	for _, p := range procs {
		calls = append(calls, p.admitted...)
	}
	return calls
}

// inSpans returns the admissions whose call lies inside each aligned span
// of span µs (numbered t/span, as the store numbers windows and buckets),
// and how many straddled a boundary.
func inSpans(calls [][2]int64, span int64) (per map[int64]int, straddling int) {
	per = map[int64]int{}
	for _, a := range calls {
		if s0, s1 := a[0]/span, a[1]/span; s0 == s1 {
			per[s0]++
		} else {
			straddling++
		}
	}
	return per, straddling
}

// fleetOracle checks calls, the admissions of a fleet on one key of
// limit l from an empty state, against the bound l's algorithm implies,
// and logs how close they came to it.
func fleetOracle(t *testing.T, l core.Limit, calls [][2]int64) {
	t.Helper()
	switch l.Algorithm {
	case core.FixedWindow:
		checkWindows(t, l, calls)
	case core.SlidingWindow:
		checkSliding(t, l, calls)
	case core.BucketedWindow:
		checkBuckets(t, l, calls)
	case core.TokenBucket, core.GCRA:
		checkRated(t, l, calls)
	default:
		t.Fatalf("no oracle for %v", l.Algorithm)
	}
}

// violations reports the violations of a bound, the first few in full.
type violations struct {
	t *testing.T
	n int
}

func (v *violations) errorf(format string, args ...any) {
	v.t.Helper()
	if v.n++; v.n <= 5 {
		v.t.Errorf(format, args...)
	}
}

func (v *violations) done() {
	v.t.Helper()
	if v.n > 5 {
		v.t.Errorf("... %d violations in all", v.n)
	}
}

// checkWindows: a fixed window counts every admission in the window of its
// instant, so each aligned window admits at most the quota.
func checkWindows(t *testing.T, l core.Limit, calls [][2]int64) {
	t.Helper()
	_, straddling, peak := boundWindows(t, l, calls)
	t.Logf("oracle (%v): at most %d of %d in an aligned window; %d straddled a window's boundary", l.Algorithm, peak, l.Quota, straddling)
}

// boundWindows checks that each aligned window of l admits at most its
// quota, and returns the admissions inside each, how many straddled a
// boundary, and the most in one window.
func boundWindows(t *testing.T, l core.Limit, calls [][2]int64) (per map[int64]int, straddling, peak int) {
	t.Helper()
	per, straddling = inSpans(calls, l.Period.Microseconds())
	v := violations{t: t}
	for w, n := range per {
		peak = max(peak, n)
		if int64(n) > l.Quota {
			v.errorf("window %d: %d admissions inside it, limit %d", w, n, l.Quota)
		}
	}
	v.done()
	return per, straddling, peak
}

// checkSliding: an exact sliding window counter admits a unit at e µs
// into window w only when cur + 1 + ⌈prev·(P−e)/P⌉ ≤ Q, with cur the
// units admitted in w before it and prev those admitted in w−1. The
// left side only grows with cur and prev and only shrinks with e, so it
// holds as well of lower bounds of cur (the admissions of w whose call
// ended before this one's began) and prev (those inside w−1) and of the
// upper bound t1 − w·P of e. And each aligned window admits at most Q.
func checkSliding(t *testing.T, l core.Limit, calls [][2]int64) {
	t.Helper()
	p := l.Period.Microseconds()
	per, straddling, peak := boundWindows(t, l, calls)
	v := violations{t: t}
	ends := map[int64][]int64{} // per window, the ends of the calls inside it, sorted
	for _, a := range calls {
		if w := a[0] / p; w == a[1]/p {
			ends[w] = append(ends[w], a[1])
		}
	}
	for _, e := range ends {
		slices.Sort(e)
	}
	tightest := int64(0)
	for _, a := range calls {
		w := a[0] / p
		if w != a[1]/p {
			continue
		}
		cur := int64(sort.Search(len(ends[w]), func(i int) bool { return ends[w][i] >= a[0] }))
		prev := int64(per[w-1])
		e := a[1] - w*p
		weight := (prev*(p-e) + p - 1) / p // ⌈prev·(P−e)/P⌉
		need := cur + 1 + weight
		tightest = max(tightest, need)
		if need > l.Quota {
			v.errorf("window %d, admission at [%d, %d] µs: %d admitted before it in the window and %d in the previous one, weighing %d at %d µs into the window: %d + 1 + %d > limit %d",
				w, a[0], a[1], cur, prev, weight, e, cur, weight, l.Quota)
		}
	}
	v.done()
	t.Logf("oracle (%v): at most %d of %d in an aligned window, cur + 1 + the previous window's weight at most %d of %d; %d straddled a window's boundary",
		l.Algorithm, peak, l.Quota, tightest, l.Quota, straddling)
}

// checkBuckets: a bucketed window keeps a unit admitted in bucket b until
// bucket b + P/p starts, so every run of P/p consecutive aligned buckets
// admits at most the quota.
func checkBuckets(t *testing.T, l core.Limit, calls [][2]int64) {
	t.Helper()
	prec := l.Precision.Microseconds()
	n := l.Period.Microseconds() / prec
	per, straddling := inSpans(calls, prec)
	first, last := int64(1<<62), int64(-1<<62)
	for b := range per {
		first, last = min(first, b), max(last, b)
	}
	v := violations{t: t}
	sum, peak := 0, 0
	for b := first; b <= last; b++ {
		sum += per[b] - per[b-n]
		peak = max(peak, sum)
		if int64(sum) > l.Quota {
			v.errorf("buckets %d to %d (a period): %d admissions inside them, limit %d", b-n+1, b, sum, l.Quota)
		}
	}
	v.done()
	t.Logf("oracle (%v): at most %d of %d in %d consecutive buckets; %d straddled a bucket's boundary", l.Algorithm, peak, l.Quota, n, straddling)
}

// checkRated: a token bucket (or GCRA, the same machine) of capacity B
// refilled at r starts full and holds at most B, so over any interval
// [a, b] it admits at most B + r·(b−a), plus 1 for the rounding of its
// refill to whole µs. Checked over every interval from an admission's t0
// to an admission's t1 (ratedPeak), each admission counting in those
// holding its call.
func checkRated(t *testing.T, l core.Limit, calls [][2]int64) {
	t.Helper()
	if len(calls) == 0 {
		return
	}
	q, p, burst := l.Quota, l.Period.Microseconds(), l.Capacity()
	v := violations{t: t}
	excess, a, b := ratedPeak(calls, q, p, func(excess, a, b int64) {
		if excess > (burst+1)*p {
			n := (excess + q*(b-a)) / p
			v.errorf("[%d, %d] µs (%s): %d admissions inside it, more than burst %d + rate·(b−a) (%.1f) + 1",
				a, b, fmtMicros(b-a), n, burst, float64(q*(b-a))/float64(p))
		}
	})
	v.done()
	long := 0
	for _, c := range calls {
		if c[1]-c[0] > 1000 {
			long++
		}
	}
	t.Logf("oracle (%v): at most burst %d + rate·(b−a) + %.2f admissions in an interval [a, b], at [%d, %d] µs (%s); %d calls took over 1ms (left out of the shorter intervals they straddle)",
		l.Algorithm, burst, float64(excess)/float64(p)-float64(burst), a, b, fmtMicros(b-a), long)
}

// ratedPeak returns the most P·(admissions inside [a, b]) − Q·(b − a) over
// the intervals from a call's t0 to a call's t1, and that interval; each
// interval's worst start is passed to check. Sweeping the ends b in order,
// a segment tree over the starts a holds P·(admissions in [a, b]) + Q·a,
// so that the worst start for b is one query: O(n log n).
func ratedPeak(calls [][2]int64, q, p int64, check func(excess, a, b int64)) (worst, worstA, worstB int64) {
	starts := make([]int64, len(calls))
	for i, a := range calls {
		starts[i] = a[0]
	}
	slices.Sort(starts)
	origin := starts[0]
	vals := make([]int64, len(starts))
	for i, a := range starts {
		vals[i] = q * (a - origin)
	}
	tree := newMaxTree(vals)
	byEnd := slices.Clone(calls)
	slices.SortFunc(byEnd, func(x, y [2]int64) int { return cmp.Compare(x[1], y[1]) })
	worst = -1 << 62
	for _, c := range byEnd {
		// c counts in every interval that starts at or before its t0.
		tree.add(0, sort.Search(len(starts), func(i int) bool { return starts[i] > c[0] }), p)
		// The intervals that end at b = c's t1.
		b := c[1]
		m, i := tree.max(0, sort.Search(len(starts), func(i int) bool { return starts[i] > b }))
		excess := m - q*(b-origin)
		check(excess, starts[i], b)
		if excess > worst {
			worst, worstA, worstB = excess, starts[i], b
		}
	}
	return worst, worstA, worstB
}

func fmtMicros(us int64) string { return fmt.Sprintf("%.3fms", float64(us)/1e3) }

// maxTree is a segment tree over values: add to a range, and the maximum of
// a range with its index.
type maxTree struct {
	n        int
	mx, pend []int64 // pend: added on a node's whole range, already in its mx
	at       []int   // the index of a node's maximum
}

func newMaxTree(vals []int64) *maxTree {
	m := &maxTree{n: len(vals), mx: make([]int64, 4*len(vals)), pend: make([]int64, 4*len(vals)), at: make([]int, 4*len(vals))}
	m.build(1, 0, m.n, vals)
	return m
}

func (m *maxTree) build(node, lo, hi int, vals []int64) {
	if hi-lo == 1 {
		m.mx[node], m.at[node] = vals[lo], lo
		return
	}
	mid := (lo + hi) / 2
	m.build(2*node, lo, mid, vals)
	m.build(2*node+1, mid, hi, vals)
	m.pull(node)
}

func (m *maxTree) pull(node int) {
	l, r := 2*node, 2*node+1
	if m.mx[l] >= m.mx[r] {
		m.mx[node], m.at[node] = m.mx[l]+m.pend[node], m.at[l]
	} else {
		m.mx[node], m.at[node] = m.mx[r]+m.pend[node], m.at[r]
	}
}

// add adds v to the values of [l, r).
func (m *maxTree) add(l, r int, v int64) {
	if l < r {
		m.addIn(1, 0, m.n, l, r, v)
	}
}

func (m *maxTree) addIn(node, lo, hi, l, r int, v int64) {
	if r <= lo || hi <= l {
		return
	}
	if l <= lo && hi <= r {
		m.mx[node] += v
		m.pend[node] += v
		return
	}
	mid := (lo + hi) / 2
	m.addIn(2*node, lo, mid, l, r, v)
	m.addIn(2*node+1, mid, hi, l, r, v)
	m.pull(node)
}

// max returns the largest value of [l, r) (l < r) and its index.
func (m *maxTree) max(l, r int) (int64, int) {
	return m.maxIn(1, 0, m.n, l, r)
}

func (m *maxTree) maxIn(node, lo, hi, l, r int) (int64, int) {
	if l <= lo && hi <= r {
		return m.mx[node], m.at[node]
	}
	mid := (lo + hi) / 2
	switch {
	case r <= mid:
		v, i := m.maxIn(2*node, lo, mid, l, r)
		return v + m.pend[node], i
	case l >= mid:
		v, i := m.maxIn(2*node+1, mid, hi, l, r)
		return v + m.pend[node], i
	}
	v1, i1 := m.maxIn(2*node, lo, mid, l, r)
	v2, i2 := m.maxIn(2*node+1, mid, hi, l, r)
	if v2 > v1 {
		v1, i1 = v2, i2
	}
	return v1 + m.pend[node], i1
}
