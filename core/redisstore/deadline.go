package redisstore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/core/engine"
)

// Deadlines. A caller that gives up on an operation (its context ends: the
// Limiter's timeout) is answered by the Limiter's failure policy, as if the
// operation had not happened; so it must not happen. Two mechanisms make
// sure of that:
//
//   - The script carries its caller's deadline, in the server's clock, and
//     changes nothing when it runs past it (the script replies EXPIRED): a
//     command that waited out a stall in the server's socket is refused
//     when the server resumes.
//   - A script that ran before the deadline may still reply after it. The
//     store reads that reply anyway (the pipeline waits lateGrace past the
//     latest deadline of its callers) and undoes what the operation did, with
//     the opposite operation (compensate).
//
// The server's clock is not the client's: every reply carries the server's
// TIME, and serverClock keeps a lower bound of the offset between the two,
// so that a deadline converted with it falls no later, in the server's
// clock, than the client's own deadline: a script that runs at or before
// it ran before the caller gave up.

// serverClock estimates off = server time − client time, in µs, where the
// client's time is its monotonic clock since base. Each reply read at
// client time r and carrying server time S bounds it: the script ran before
// the reply was read, so off ≥ S − r. The estimate is the largest such
// bound seen within the last two seconds, so that it follows the server's
// clock if it steps back; older, it is lowered by driftAllowance per second
// of its age, since the clocks drift apart slowly (NTP slews at most
// 500 ppm). That allowance grows without bound while the store is idle:
// after 100 s it would take 100 ms, a Limiter's whole timeout, and the
// first calls after such a pause would be refused as past their deadline.
// So a batch whose deadlines the allowance would cut by more than a
// quarter of their time left (stale) first asks the server's TIME.
type serverClock struct {
	base time.Time

	mu   sync.Mutex
	cur  int64 // largest bound seen in the current second of the client's clock
	prev int64 // in the second before
	sec  int64 // the current second: client µs / 1e6
	// seen is the client µs of the last sample, 0 for none: written under
	// mu, read without it by known and stale.
	seen atomic.Int64
}

// driftAllowance is how many µs per second an old offset is lowered by.
const driftAllowance = 1000

func newServerClock() *serverClock { return &serverClock{base: time.Now()} }

// since returns t in client µs (monotonic, from t's monotonic reading).
func (k *serverClock) since(t time.Time) int64 { return int64(t.Sub(k.base) / time.Microsecond) }

// known reports whether a reply has taught the offset yet: deadline
// returns 0 until it has.
func (k *serverClock) known() bool { return k.seen.Load() != 0 }

// serverTime returns the server's time that reply v carries (its head, in
// µs), if it carries one.
func serverTime(v any) (int64, bool) {
	r, ok := v.(string)
	if !ok || len(r) < 8 {
		return 0, false
	}
	return exact(r)
}

// observe records srv, a server time carried by a reply read by now (the
// latest of a batch's: one clock reading and one lock a batch).
func (k *serverClock) observe(srv int64, now time.Time) {
	at := k.since(now) + 1
	bound := srv - at
	sec := at / 1e6
	k.mu.Lock()
	switch {
	case k.seen.Load() == 0 || sec > k.sec+1:
		k.cur, k.prev = bound, bound
	case sec == k.sec+1:
		k.prev, k.cur = k.cur, bound
	default:
		k.cur = max(k.cur, bound)
	}
	k.sec = max(k.sec, sec)
	k.seen.Store(at)
	k.mu.Unlock()
}

// drift returns what deadline lowers the offset by for an offset of age µs
// (see serverClock): nothing within two seconds, else driftAllowance per
// second of its age.
func drift(age int64) int64 {
	if age <= 2e6 {
		return 0
	}
	return age / 1e6 * driftAllowance
}

// stale reports whether the allowance for drift that deadline would take
// at now is more than a quarter of the time left until the earliest
// deadline among calls (a Peek carries none), so that the offset should be
// asked afresh.
func (k *serverClock) stale(now time.Time, calls []*call) bool {
	seen := k.seen.Load()
	if seen == 0 {
		return false
	}
	cut := drift(k.since(now) + 1 - seen)
	if cut == 0 {
		return false
	}
	for _, c := range calls {
		if !c.deadline.IsZero() && c.op.Kind != engine.Peek && 4*cut > int64(c.deadline.Sub(now)/time.Microsecond) {
			return true
		}
	}
	return false
}

// deadline returns d in the server's clock (Unix µs), no later than the
// server's time at the client's instant d; or 0 (no deadline) when no
// reply has taught the offset yet. now is the client's time (a batch's
// calls share one reading).
func (k *serverClock) deadline(d, now time.Time) int64 {
	at := k.since(now) + 1
	k.mu.Lock()
	seen, off := k.seen.Load(), max(k.cur, k.prev)
	if at/1e6 > k.sec+1 {
		off = k.cur
	}
	k.mu.Unlock()
	if seen == 0 {
		return 0
	}
	return max(k.since(d)+off-drift(at-seen), 1)
}
