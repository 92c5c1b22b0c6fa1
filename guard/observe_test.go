package guard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
)

// outcomes is a core.Observer that keeps the outcomes of decisions.
type outcomes struct {
	mu  sync.Mutex
	out []core.Outcome
}

func (o *outcomes) ObserveDecision(_ context.Context, ob *core.Observation) {
	o.mu.Lock()
	o.out = append(o.out, ob.Outcome)
	o.mu.Unlock()
}
func (o *outcomes) ObserveEvent(context.Context, *core.Event) {}

// A dry run's denials are observed as such: the request passed.
func TestDryRunDenialsAreObservedAsDryRun(t *testing.T) {
	for _, c := range []struct {
		name string
		dry  bool
		want core.Outcome
	}{
		{"in a dry run, a denial is dry-run denied", true, core.OutcomeDryRunDenied},
		{"otherwise, a denial is denied", false, core.OutcomeDenied},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			obs := &outcomes{}
			lim, err := core.New(e.store, core.WithClock(e.clock), fixed(1, time.Minute, "m"), core.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			g := mustNew(t, lim, guard.WithDryRun(c.dry))
			served(t, g, request("192.0.2.1:1"))
			served(t, g, request("192.0.2.1:1"))
			if len(obs.out) != 2 || obs.out[0] != core.OutcomeAllowed || obs.out[1] != c.want {
				t.Errorf("outcomes = %v, want [allowed %v]", obs.out, c.want)
			}
		})
	}
}
