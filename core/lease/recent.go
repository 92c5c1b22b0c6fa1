package lease

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/tollgate/tollgate/core/engine"
)

// recent decides which keys get an allowance: a key is given one when it
// is asked about twice within a renew interval, and until then its Takes
// go to the shared store as they would without leases.
//
// An allowance pays for itself only for a key asked about more than once
// per lease; for the others (most keys of a large key space: one request
// per client per second or minute) it costs a map entry, a lock and the
// bookkeeping of a reservation on every request, with no reservation ever
// worth making ahead: their measured demand over a renew interval is less
// than a unit. recent filters them out at the cost of one hash and one
// atomic word: a direct-mapped table of slots, each holding the last time
// (48 bits of local µs, wrapping) a key hashed there was asked about and
// 16 bits of its hash. Two keys of one slot overwrite each other, which
// only delays an allowance; a false match (same slot and same 16 bits)
// only creates one early. Either way decisions are the shared store's or
// an allowance's, both exact: the filter changes where a Take is
// decided, never what it admits.
type recent struct {
	slots  []atomic.Uint64
	mask   uint64
	seed   maphash.Seed
	within int64 // µs
}

const (
	timeBits = 48
	timeMask = 1<<timeBits - 1
)

// newRecent returns a filter sized for maxKeys allowances (two slots per
// key, 2^10 to 2^18 slots: 8 KiB to 2 MiB) that promotes keys asked about
// twice within the given µs.
func newRecent(maxKeys int, within int64) *recent {
	n := 1 << 10
	for n < 2*maxKeys && n < 1<<18 {
		n <<= 1
	}
	return &recent{slots: make([]atomic.Uint64, n), mask: uint64(n - 1), seed: maphash.MakeSeed(), within: within}
}

// again records that key was asked about under plan at local µs now, and
// reports whether it was asked about before, within the filter's span.
func (r *recent) again(plan *engine.Plan, key string, now int64) bool {
	h := maphash.Comparable(r.seed, key) ^ plan.ID*0x9e3779b97f4a7c15 // maphash.String in one call fewer
	slot := &r.slots[h&r.mask]
	fp := h >> timeBits
	t := uint64(now) & timeMask
	for {
		v := slot.Load()
		if v>>timeBits == fp && (t-v)&timeMask < uint64(r.within) {
			if v&timeMask != t {
				slot.CompareAndSwap(v, fp<<timeBits|t) // a later time; lost to another caller, as good
			}
			return true
		}
		// One caller of a burst on a cold key records it and goes to the
		// shared store alone; the others, finding the record, get the
		// allowance, whose first reservation they share.
		if slot.CompareAndSwap(v, fp<<timeBits|t) {
			return false
		}
	}
}
