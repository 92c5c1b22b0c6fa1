package guardtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// TriggerHeader is the request header that makes TriggerRule, and the
// test functions an adapter writes beside it, misbehave.
const TriggerHeader = "X-Trigger"

// Boom is the value a misbehaving test function panics with.
const Boom = "guardtest: boom"

// TriggerRule returns a WithRule option for tests of a flow that a
// configured function breaks: a rule of 100 per minute on a fresh
// memstore, keyed "ok", unless the request's TriggerHeader says
//
//	panic  the key function panics with Boom
//	deny   the rule denies: its key is exhausted
//	fail   the key function fails, an error for the ErrorHandler
//
// Put it after a rule of 1 per minute: if a misbehaving request left a
// charge behind, the next request is denied.
func TriggerRule(t testing.TB) guard.Option {
	t.Helper()
	lim := NewLimiter(t, nil, core.Per(100, time.Minute).WithAlgorithm(core.FixedWindow).Named("trigger"))
	if d, err := lim.AllowN(context.Background(), "full", 100); err != nil || !d.Allowed {
		t.Fatalf("AllowN(full, 100) = %v, %v; want allowed", d.Allowed, err)
	}
	return guard.WithRule(lim, func(r keyfuncs.Request) (string, error) {
		switch r.Header(TriggerHeader) {
		case "panic":
			panic(Boom)
		case "deny":
			return "full", nil
		case "fail":
			return "", errTrigger
		}
		return "ok", nil
	})
}

var errTrigger = errors.New("guardtest: the trigger rule failed")
