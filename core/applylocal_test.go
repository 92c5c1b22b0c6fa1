package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// localStore is a remote-looking store that answers Takes of cost 1 in
// process (ApplyLocal) and fails everything else, counting its calls.
type localStore struct{ applies atomic.Int64 }

var errRemote = errors.New("remote store down")

func (s *localStore) Apply(context.Context, engine.Op) (engine.Result, error) {
	s.applies.Add(1)
	return engine.Result{}, errRemote
}

func (s *localStore) ApplyLocal(op engine.Op) (engine.Result, bool) {
	if op.Kind != engine.Take || op.Cost != 1 {
		return engine.Result{}, false
	}
	return engine.Result{Allowed: true, Remaining: 41}, true
}

func (*localStore) Close() error { return nil }

// A store's ApplyLocal answers before the timeout, the breaker and the
// failure policy: an open breaker does not stop decisions made in memory,
// and what ApplyLocal declines goes to Apply.
func TestApplyLocalAnswersBeforeTheBreaker(t *testing.T) {
	st := &localStore{}
	lim, err := core.New(st, core.PerMinute(100), core.WithTimeout(time.Millisecond),
		core.WithBreaker(core.Breaker{Consecutive: 1, MinOutage: time.Nanosecond, CoolDown: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 { // cost 2: declined locally, failed remotely, the breaker opens
		if _, err := lim.AllowN(ctx, "k", 2); !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("AllowN(2) error = %v, want one wrapping ErrUnavailable", err)
		}
	}
	d, err := lim.Allow(ctx, "k")
	if err != nil || !d.Allowed || d.Remaining != 41 {
		t.Errorf("Allow with the breaker open = %+v, %v; want the local answer (allowed, 41 remaining)", d, err)
	}
	if n := st.applies.Load(); n > 3 {
		t.Errorf("Apply called %d times, want at most the 3 declined operations", n)
	}
}
