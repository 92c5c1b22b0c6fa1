package topk

import (
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// OnDenied returns a hook for guard.WithOnDenied that counts every denial
// in t with t.Denied(d.Key, d.Cost): every adapter accepts it, as their
// options are guard.Options.
//
//	nethttp.New(lim, guard.WithOnDenied(topk.OnDenied(t)))
//
// A Guard keeps one OnDenied hook (the last given; the adapters'
// WithOnDenied included): to log denials too, call t.Denied from your own
// hook instead. Dry-run denials are counted too (Denial.DryRun), so a dry
// run shows whom a limit would stop. A guard with several rules
// (guard.WithRule) counts the key of whichever rule denied, so IPs and
// user IDs share one ranking; to rank them apart, use a Tracker per rule:
//
//	guard.WithOnDenied(func(_ keyfuncs.Request, d *guard.Denial) {
//		perRule[d.Rule].Denied(d.Key, d.Cost)
//	})
//
// OnDenied(nil) returns nil, which guard.New rejects.
func OnDenied(t *Tracker) func(r keyfuncs.Request, d *guard.Denial) {
	if t == nil {
		return nil
	}
	return func(_ keyfuncs.Request, d *guard.Denial) { t.Denied(d.Key, d.Cost) }
}
