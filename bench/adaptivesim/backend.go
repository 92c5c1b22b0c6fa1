package main

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// backend is the service under test: slots requests are served at once,
// each for a log-normal service time (median median, σ 0.52: mean 1.146 ×
// the median, p99 3.37 ×), the others wait in a FIFO queue, so latency
// grows with concurrency past the slots. SetSlots changes its capacity
// while it runs. A request whose client goes away leaves the queue, or
// stops its service and frees its slot.
type backend struct {
	median time.Duration

	mu      sync.Mutex
	slots   int
	busy    int
	waiting []chan struct{}

	inflight atomic.Int64 // requests inside the handler: queued or served
	rngs     sync.Pool
}

func newBackend(slots int, median time.Duration) *backend {
	b := &backend{slots: slots, median: median}
	var seed atomic.Uint64
	b.rngs.New = func() any { return rand.New(rand.NewPCG(seed.Add(1), 22)) }
	return b
}

// SetSlots sets the number of requests served at once.
func (b *backend) SetSlots(n int) {
	b.mu.Lock()
	b.slots = n
	b.dispatch()
	b.mu.Unlock()
}

// dispatch starts waiting requests while slots are free. b.mu is held.
func (b *backend) dispatch() {
	for b.busy < b.slots && len(b.waiting) > 0 {
		ch := b.waiting[0]
		b.waiting = b.waiting[1:]
		b.busy++
		close(ch)
	}
}

// acquire takes a slot, waiting in line; false if ctx ends first.
func (b *backend) acquire(ctx context.Context) bool {
	b.mu.Lock()
	if b.busy < b.slots && len(b.waiting) == 0 {
		b.busy++
		b.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	b.waiting = append(b.waiting, ch)
	b.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, w := range b.waiting {
			if w == ch {
				b.waiting = append(b.waiting[:i], b.waiting[i+1:]...)
				return false
			}
		}
		// granted meanwhile: give the slot back
		b.busy--
		b.dispatch()
		return false
	}
}

func (b *backend) release() {
	b.mu.Lock()
	b.busy--
	b.dispatch()
	b.mu.Unlock()
}

func (b *backend) serviceTime() time.Duration {
	r := b.rngs.Get().(*rand.Rand)
	d := time.Duration(float64(b.median) * math.Exp(0.52*r.NormFloat64()))
	b.rngs.Put(r)
	return d
}

// ServeHTTP serves one request: 200 once served, nothing when its client
// went away (the client sees its own error).
func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	ctx := r.Context()
	if !b.acquire(ctx) {
		return
	}
	t := time.NewTimer(b.serviceTime())
	select {
	case <-t.C:
		b.release()
		w.WriteHeader(http.StatusOK)
	case <-ctx.Done():
		t.Stop()
		b.release()
	}
}
