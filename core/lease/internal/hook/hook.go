// Package hook lets package leasetest drive a lease.Store on a virtual
// clock, as the lease package's own tests do, without making that part of
// the lease package's API: package lease sets these functions when it is
// initialized. Only core/lease and the packages under it can import it.
package hook

import "github.com/tollgate/tollgate/core"

var (
	// Pending returns the number of calls of s, a *lease.Store, in flight
	// in the background: renewals and give-backs.
	Pending func(s core.Store) int64
	// Expire ends, at now (Unix µs), the lots of s, a *lease.Store, whose
	// lease ended, as their timers do in real time; their give-backs run
	// in the background.
	Expire func(s core.Store, now int64)
)
