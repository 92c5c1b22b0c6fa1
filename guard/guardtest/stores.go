package guardtest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tollgate/tollgate/core/engine"
)

// ErrStore is the error of FailingStore. Its text must never reach a
// client: Run checks that no response body contains it.
var ErrStore = errors.New("guardtest: store exploded at 10.0.0.7:6379 (secret detail)")

// FailingStore is a core.Store whose every operation fails with Err
// (ErrStore when nil).
type FailingStore struct {
	Err error // the error of every operation; nil means ErrStore
}

// Apply implements core.Store.
func (s FailingStore) Apply(context.Context, engine.Op) (engine.Result, error) {
	if s.Err != nil {
		return engine.Result{}, s.Err
	}
	return engine.Result{}, ErrStore
}

// Close implements core.Store.
func (FailingStore) Close() error { return nil }

// HangingStore is a core.Store whose operations block until their context
// ends, and then fail with the context's error: a store that does not
// answer.
type HangingStore struct{}

// Apply implements core.Store.
func (HangingStore) Apply(ctx context.Context, _ engine.Op) (engine.Result, error) {
	<-ctx.Done()
	return engine.Result{}, ctx.Err()
}

// Close implements core.Store.
func (HangingStore) Close() error { return nil }

// Clock is a core.Clock that moves only when told. It is safe for
// concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Epoch is where the clocks of Run start: a whole hour, so that fixed
// windows of a second, a minute or an hour all start there.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now implements core.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
