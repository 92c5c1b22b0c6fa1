package engine

// SlidingLog, BucketedWindow and Concurrency keep a log of marks, oldest
// first, and the sum of their costs in A.
//
//	SlidingLog      mark = (timestamp µs, cost); live while t < timestamp + P
//	BucketedWindow  mark = (bucket number b = ⌊t/p⌋, count); live while
//	                ⌊t/p⌋ − n < b, n = P/p, that is while t < (b+n)·p
//	Concurrency     mark = (lease, cost): an acquisition made at time lease
//	                (µs, unique on the key), live while t < lease + P, or
//	                until Released
//
// Cost c passes when A + c ≤ Q; otherwise it waits until enough of the
// oldest marks have expired.

// markExpiry returns when (µs) mark m stops counting.
func markExpiry(sh *shape, m Mark) int64 {
	if sh.Algorithm == BucketedWindow {
		return (m.At + sh.Buckets) * sh.Precision
	}
	return m.At + sh.Period
}

func logRoll(sh *shape, st *State, now int64) { dropExpired(sh, st, now) }

// release removes the acquisition of lease from a Concurrency log, if it
// is still there: a second release of one lease changes nothing.
func release(st *State, lease int64) {
	for i, m := range st.Log {
		if m.At == lease {
			st.A -= m.N
			st.Log = append(st.Log[:i], st.Log[i+1:]...)
			return
		}
		if m.At > lease {
			return
		}
	}
}

func bucketRoll(sh *shape, st *State, now int64) { dropExpired(sh, st, now) }

func dropExpired(sh *shape, st *State, now int64) {
	k := 0
	for k < len(st.Log) && markExpiry(sh, st.Log[k]) <= now {
		st.A -= st.Log[k].N
		k++
	}
	if k == len(st.Log) {
		st.Log = st.Log[:0]
	} else if k > 0 {
		st.Log = st.Log[k:]
	}
}

func markNeed(sh *shape, st *State, now, c int64) (bool, int64) {
	excess := (st.A - sh.Quota) + c // in this order every partial sum stays below 2^53
	if excess <= 0 {
		return true, 0
	}
	for _, m := range st.Log {
		if excess -= m.N; excess <= 0 {
			return false, markExpiry(sh, m) - now
		}
	}
	return false, -1 // unreachable for c ≤ Q
}

// markAdd charges at position at (a timestamp or a bucket number), merging
// with the newest mark when it is not older; a refund takes from the newest
// marks first.
func markAdd(sh *shape, st *State, at, d int64) {
	if d > 0 {
		d = min(d, sh.debtCap()-st.A)
		if d <= 0 {
			return
		}
		st.A += d
		if n := len(st.Log); n > 0 && st.Log[n-1].At >= at {
			st.Log[n-1].N += d
			return
		}
		st.Log = append(st.Log, Mark{At: at, N: d})
		return
	}
	r := min(-d, st.A)
	st.A -= r
	for r > 0 {
		last := &st.Log[len(st.Log)-1]
		x := min(last.N, r)
		last.N -= x
		r -= x
		if last.N == 0 {
			st.Log = st.Log[:len(st.Log)-1]
		}
	}
}

func markReport(sh *shape, st *State, now int64) (int64, int64) {
	if len(st.Log) == 0 {
		return sh.Quota, 0
	}
	return max(sh.Quota-st.A, 0), markExpiry(sh, st.Log[len(st.Log)-1]) - now
}
