package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core/engine"
)

// watched returns a pending call whose caller gives up at giveUp, as
// batcher.do prepares it.
func watched(giveUp time.Time) *call {
	return &call{deadline: giveUp, done: make(chan struct{}, 1)}
}

// TestWatchGivesUpAtEachDeadline: calls watched in any order of their
// deadlines (a context's deadline can come before the Limiter's) are each
// given up at their own, not before, and not held up by a later one.
func TestWatchGivesUpAtEachDeadline(t *testing.T) {
	w := newWatch()
	start := time.Now()
	offsets := []time.Duration{800, 200, 600, 400} // ms; the second is the earliest
	woke := make([]time.Duration, len(offsets))
	errs := make([]error, len(offsets))
	var wg sync.WaitGroup
	for i, ms := range offsets {
		c := watched(start.Add(ms * time.Millisecond))
		w.add(c)
		wg.Go(func() {
			<-c.done
			woke[i], errs[i] = time.Since(start), c.res.err
			w.remove(c)
		})
	}
	wg.Wait()
	for i, ms := range offsets {
		at := ms * time.Millisecond
		if !errors.Is(errs[i], context.DeadlineExceeded) {
			t.Errorf("call %d: error %v, want context.DeadlineExceeded", i, errs[i])
		}
		// Not before its deadline; and before the next one's, even on a
		// loaded machine (slack < 200 ms).
		if woke[i] < at || woke[i] > at+slack {
			t.Errorf("call %d, deadline %v: given up after %v", i, at, woke[i])
		}
	}
}

// TestWatchLeavesAnsweredCalls: a call answered before its deadline keeps
// its answer, and its caller is not woken twice.
func TestWatchLeavesAnsweredCalls(t *testing.T) {
	w := newWatch()
	s := &Store{}
	early := watched(time.Now().Add(30 * time.Millisecond))
	late := watched(time.Now().Add(30 * time.Millisecond))
	w.add(early)
	w.add(late)
	if !s.finish(early, "reply", nil) {
		t.Fatal("finish did not answer a pending call")
	}
	<-early.done
	<-late.done // given up by the watch
	if !errors.Is(late.res.err, context.DeadlineExceeded) {
		t.Errorf("late call: %v, want context.DeadlineExceeded", late.res.err)
	}
	time.Sleep(50 * time.Millisecond) // past the deadline: the watch has fired
	if early.res.v != "reply" || early.res.err != nil || len(early.done) != 0 {
		t.Errorf("answered call after its deadline: %+v, %d more answers", early.res, len(early.done))
	}
	if early.state.Load() != answered || late.state.Load() != abandoned {
		t.Errorf("states %d and %d, want answered and abandoned", early.state.Load(), late.state.Load())
	}
	w.remove(early)
	w.remove(late)
}

// TestWatchReusesItsSlots: a watch holds as many slots as calls were ever
// watched at once, not one per call it watched, and nothing once they
// are removed.
func TestWatchReusesItsSlots(t *testing.T) {
	w := newWatch()
	for range 1000 {
		a, b := watched(time.Now().Add(time.Hour)), watched(time.Now().Add(time.Hour))
		w.add(a)
		w.add(b)
		w.remove(a)
		w.remove(b)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.calls) != 2 {
		t.Errorf("%d slots after 1000 rounds of 2 calls, want 2", len(w.calls))
	}
	for i, c := range w.calls {
		if c != nil {
			t.Errorf("slot %d still holds a removed call", i)
		}
	}
}

// TestWatchGivesUpOnAReleaseAtItsCallersDeadline: a Release runs until
// lateGrace past its caller's deadline (bind), but its caller is given up
// at the deadline itself.
func TestWatchGivesUpOnAReleaseAtItsCallersDeadline(t *testing.T) {
	w := newWatch()
	start := time.Now()
	c := &call{op: engine.Op{Kind: engine.Release}, done: make(chan struct{}, 1)}
	c.deadline = start.Add(60 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), c.deadline)
	defer cancel()
	if giveUp := c.bind(ctx); !giveUp.Equal(c.giveUp()) {
		t.Fatalf("bind returned %v, giveUp() %v", giveUp, c.giveUp())
	}
	w.add(c)
	<-c.done
	if took := time.Since(start); took < 60*time.Millisecond || took > 60*time.Millisecond+slack {
		t.Errorf("Release's caller given up after %v, want 60ms (its call runs until %v)", took, c.deadline.Sub(start))
	}
	w.remove(c)
}
