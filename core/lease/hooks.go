package lease

import (
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease/internal/hook"
)

// The fleet simulator (package leasetest) drives Stores on a virtual
// clock: it ends their lots as their timers would, and waits for their
// background work.
func init() {
	hook.Pending = func(s core.Store) int64 { return s.(*Store).track.n.Load() }
	hook.Expire = func(s core.Store, now int64) { s.(*Store).expireAll(now) }
}

// expireAll ends, at now (Unix µs), the lots whose lease ended, as their
// timers do in real time.
func (s *Store) expireAll(now int64) {
	s.keys.Range(func(_, v any) bool {
		a := v.(*allowance)
		a.mu.Lock()
		a.expire(now)
		a.mu.Unlock()
		return true
	})
}
