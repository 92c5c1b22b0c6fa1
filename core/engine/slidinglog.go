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

// release ends the acquisition of lease on a Concurrency log, if it is
// still there: a second release of one lease changes nothing. It costs
// O(log n) in the marks held, amortized: the log is in lease order
// (leases only grow), so the mark is found by binary search and zeroed in
// place rather than cut out (which moved every newer mark). Zeroed marks
// count nothing, and markNeed, markReport and dropExpired read them as
// the absent marks they stand for: those at either end are trimmed at
// once, so the oldest and newest marks are always live, and the log is
// compacted when zeroed marks outnumber live ones (n > 2·A + 16, each live
// mark holding at least one unit), which the releases since the last
// compaction pay for.
func release(st *State, lease int64) {
	log := st.Log
	lo, hi := 0, len(log)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if log[mid].At < lease {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(log) || log[lo].At != lease || log[lo].N == 0 {
		return
	}
	st.A -= log[lo].N
	log[lo].N = 0
	first, end := 0, len(log)
	for first < end && log[first].N == 0 {
		first++
	}
	for end > first && log[end-1].N == 0 {
		end--
	}
	log = log[first:end]
	if int64(len(log)) > 2*st.A+16 {
		live := log[:0]
		for _, m := range log {
			if m.N != 0 {
				live = append(live, m)
			}
		}
		clear(log[len(live):])
		log = live
	}
	st.Log = log
}

func bucketRoll(sh *shape, st *State, now int64) { dropExpired(sh, st, now) }

// dropExpired drops the marks expired at now, and the released ones
// (zeroed: see release) that their going leaves at the front, so that the
// oldest mark is live, as the window and the Redis store's log (which
// removes a released mark outright) read it.
func dropExpired(sh *shape, st *State, now int64) {
	k := 0
	for k < len(st.Log) && (markExpiry(sh, st.Log[k]) <= now || st.Log[k].N == 0) {
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
