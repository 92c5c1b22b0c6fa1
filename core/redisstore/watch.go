package redisstore

import (
	"context"
	"sync"
	"time"
)

// A watch gives up for the callers of a batcher's calls when their
// deadlines pass: one timer for all the calls it watches, set for the
// earliest of their deadlines, where a timer per call (started, stopped
// and pooled on every call) cost the client about 6% of its CPU at 64
// callers (the median of seven paired runs: BENCHMARKS.md). A caller
// registers its call before it joins the queue and removes it when it
// stops waiting; when the timer fires, every watched call whose caller's
// deadline has passed and that is not answered yet is abandoned, exactly
// as its caller's own timer did it: the caller is woken with
// context.DeadlineExceeded, and a reply that comes later is undone (see
// Store.finish).
//
// The Limiter's timeout is the same for every call, so deadlines mostly
// come in the order the calls do: the earliest deadline watched is that of
// the oldest call in flight, the timer is rarely set again as calls come,
// and it fires about once a timeout while calls keep coming, each time
// looking over the calls in flight. It is never stopped, not even when
// its batcher closes, as a caller whose call waits in a stalled server's
// socket still gives up at its deadline then: once no call is watched it
// is not set again, and a timer that is not set costs nothing.
type watch struct {
	mu    sync.Mutex
	calls []*call // by slot (call.slot); nil: free
	free  []int32 // the free slots
	timer *time.Timer
	at    time.Time // when timer fires; zero: it is stopped
}

func newWatch() *watch {
	w := new(watch)
	w.timer = time.AfterFunc(time.Hour, w.fire)
	w.timer.Stop()
	return w
}

// add watches c, whose caller gives up at c.giveUp(), not zero.
func (w *watch) add(c *call) {
	w.mu.Lock()
	if n := len(w.free); n > 0 {
		c.slot = w.free[n-1]
		w.free = w.free[:n-1]
		w.calls[c.slot] = c
	} else {
		c.slot = int32(len(w.calls))
		w.calls = append(w.calls, c)
	}
	if at := c.giveUp(); w.at.IsZero() || at.Before(w.at) {
		w.at = at
		w.timer.Reset(time.Until(at))
	}
	w.mu.Unlock()
}

// remove stops watching c, once its caller no longer waits. The timer is
// left as it is: when it fires it finds the calls still watched.
func (w *watch) remove(c *call) {
	w.mu.Lock()
	w.calls[c.slot] = nil
	w.free = append(w.free, c.slot)
	w.mu.Unlock()
}

// fire abandons every watched call whose caller's deadline has passed,
// and sets the timer for the earliest deadline still ahead.
func (w *watch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	var next time.Time
	for _, c := range w.calls {
		if c == nil {
			continue
		}
		switch at := c.giveUp(); {
		case !now.Before(at):
			// Its caller removes it once woken; until then it is left
			// alone, answered or abandoned.
			if c.state.CompareAndSwap(pending, abandoned) {
				c.res = result{err: context.DeadlineExceeded}
				c.done <- struct{}{}
			}
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	w.at = next
	if !next.IsZero() {
		w.timer.Reset(time.Until(next))
	}
}
