package grpclimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard/guardtest"
)

const slots = 3

// inFlight returns a Limiter of 3 units in flight, in the same decision
// as a rate that never binds.
func inFlight(t *testing.T) *core.Limiter {
	t.Helper()
	return guardtest.NewLimiter(t, nil, core.InFlight(slots, time.Minute), core.PerSecond(1_000_000))
}

// checkFree checks that no unit of lim is in flight for the client.
func checkFree(t *testing.T, lim *core.Limiter, where string) {
	t.Helper()
	if n := remaining(t, lim, client); n != slots {
		t.Errorf("%s: %d of %d units in flight, want none", where, slots-n, slots)
	}
}

// TestConcurrentRPCsNeverExceedTheInFlightLimit sends 16 goroutines' RPCs
// at once under a limit of 3 in flight: the handler, counting itself in
// flight, never sees more than 3, and sees 3; those over it are denied.
// Then handlers that panic, behind a recovery interceptor, release their
// units too.
func TestConcurrentRPCsNeverExceedTheInFlightLimit(t *testing.T) {
	lim := inFlight(t)
	var cur, peak atomic.Int64
	var panics atomic.Bool
	svc := &service{unary: func(ctx context.Context) error {
		if panics.Load() {
			panic("the handler panics")
		}
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Millisecond) // the handler's work
		cur.Add(-1)
		return nil
	}}
	c := unaryServer(t, svc, recoverUnary, grpclimit.UnaryServerInterceptor(lim))

	var passed, denied atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 25 {
				switch r := callUnary(t, c, 0); r.code() {
				case codes.OK:
					passed.Add(1)
				case codes.ResourceExhausted:
					denied.Add(1)
				default:
					t.Errorf("code %v (%v), want OK or ResourceExhausted", r.code(), r.err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d passed, %d denied; at most %d in the handler at once", passed.Load(), denied.Load(), peak.Load())
	if p := peak.Load(); p > slots {
		t.Errorf("%d RPCs in the handler at once, more than the limit of %d", p, slots)
	} else if p < slots || denied.Load() == 0 {
		t.Errorf("peak %d in flight, %d denied: the load never filled the limit, so tested nothing", p, denied.Load())
	}
	checkFree(t, lim, "after the load")

	panics.Store(true)
	for range 2 * slots {
		if r := callUnary(t, c, 0); r.code() != codes.Internal {
			t.Fatalf("a panicking handler: code %v (%v), want Internal from the recovery interceptor", r.code(), r.err)
		}
	}
	checkFree(t, lim, "after handlers that panicked")
}

// TestAStreamHoldsItsUnitUntilItsHandlerReturns opens 3 streams that stay
// open under a limit of 3 in flight: a 4th is denied until one ends. A
// stream handler that panics releases its unit too.
func TestAStreamHoldsItsUnitUntilItsHandlerReturns(t *testing.T) {
	lim := inFlight(t)
	release := make(chan struct{})
	var panics atomic.Bool
	svc := &service{stream: func(ss grpc.ServerStream) error {
		if panics.Load() {
			panic("the handler panics")
		}
		if err := ss.SendMsg(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
		<-release
		return nil
	}}
	c := streamServer(t, svc, recoverStream, grpclimit.StreamServerInterceptor(lim))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var open []grpc.ServerStreamingClient[testpb.StreamingOutputCallResponse]
	for i := range slots {
		st, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil { // the handler runs: it sent its first message
			t.Fatalf("stream %d: %v", i+1, err)
		}
		open = append(open, st)
	}
	if r := callStream(t, c, nil); r.code() != codes.ResourceExhausted {
		t.Errorf("a 4th stream: code %v (%v), want ResourceExhausted", r.code(), r.err)
	}
	close(release)
	for _, st := range open {
		for {
			if _, err := st.Recv(); err != nil {
				break
			}
		}
	}
	checkFree(t, lim, "after the streams ended")

	panics.Store(true)
	for range 2 * slots {
		if r := callStream(t, c, nil); r.code() != codes.Internal {
			t.Fatalf("a panicking handler: code %v (%v), want Internal from the recovery interceptor", r.code(), r.err)
		}
	}
	checkFree(t, lim, "after handlers that panicked")
}
