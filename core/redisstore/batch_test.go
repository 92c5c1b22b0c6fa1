package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// TestCallsThatJoinAClosedBatcherAreAnswered: a call that joins the queue
// of a batcher Close has already emptied (its caller passed the store's
// closed check first) is answered ErrClosed, even with no deadline: no
// worker is left to take it. Before, the caller's select could pick the
// send over the closed stop channel, and wait forever.
func TestCallsThatJoinAClosedBatcherAreAnswered(t *testing.T) {
	b := newBatcher(&Store{}, nil, "", 4, 1)
	b.close()
	for i := range 50 {
		c := &call{op: engine.Op{Kind: engine.Take}}
		got := make(chan error, 1)
		go func() {
			_, err := b.do(context.Background(), c)
			got <- err
		}()
		select {
		case err := <-got:
			if !errors.Is(err, core.ErrClosed) {
				t.Fatalf("call %d: %v, want core.ErrClosed", i, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("call %d: no answer 2 s after joining a closed batcher", i)
		}
	}
}
