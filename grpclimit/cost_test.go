package grpclimit_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
)

func TestMethodCosts(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(10, "per-minute"))
	c := unaryServer(t, &service{}, grpclimit.UnaryServerInterceptor(lim,
		grpclimit.WithMethodCosts(map[string]int64{unaryMethod: 3}, 1)))
	ctx := context.Background()
	for _, s := range []struct {
		name string
		call func() error
		left int64
	}{
		{"a method in the map costs its cost", func() error { return callUnary(t, c, 0).err }, 7},
		{"any other method costs the others' cost", func() error {
			_, err := c.EmptyCall(ctx, &testpb.Empty{})
			return err
		}, 6},
	} {
		t.Run(s.name, func(t *testing.T) {
			if err := s.call(); err != nil {
				t.Fatal(err)
			}
			if n := remaining(t, lim, client); n != s.left {
				t.Errorf("remaining = %d, want %d", n, s.left)
			}
		})
	}
}

func TestACostFunctionReadsTheRPC(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(10, "per-minute"))
	c := unaryServer(t, &service{}, grpclimit.UnaryServerInterceptor(lim,
		grpclimit.WithCostFunc(func(ctx context.Context, fullMethod string) (int64, error) {
			if fullMethod != unaryMethod {
				return 0, errors.New("unexpected method")
			}
			if v := metadata.ValueFromIncomingContext(ctx, "x-pages"); len(v) == 1 && v[0] == "4" {
				return 4, nil
			}
			return 0, errors.New("x-pages: want 4")
		})))
	t.Run("its cost is charged", func(t *testing.T) {
		if r := callUnary(t, c, 0, "x-pages", "4"); r.err != nil {
			t.Fatal(r.err)
		}
		if n := remaining(t, lim, client); n != 6 {
			t.Errorf("remaining = %d, want 6", n)
		}
	})
	t.Run("its error fails the RPC with InvalidArgument and a generic message", func(t *testing.T) {
		r := callUnary(t, c, 0, "x-pages", "abc")
		if r.code() != codes.InvalidArgument {
			t.Fatalf("code %v (%v), want InvalidArgument", r.code(), r.err)
		}
		if strings.Contains(r.err.Error(), "x-pages") {
			t.Errorf("message %q holds the cost function's error", r.err)
		}
	})
}

// TestSettling checks what an RPC costs in the end: what the handler
// reports, what its response weighs, nothing when it fails on the server.
func TestSettling(t *testing.T) {
	for _, c := range []struct {
		name   string
		opt    grpclimit.Option
		unary  func(ctx context.Context) error
		stream func(ss grpc.ServerStream) error
		size   int32 // the payload asked for
		code   codes.Code
		left   int64 // of 10, each RPC admitted at cost 1
	}{
		{
			name:  "a unary handler reports its cost on its context",
			opt:   grpclimit.WithReportedCost(),
			unary: func(ctx context.Context) error { return report(ctx, 5) },
			left:  5,
		},
		{
			name:   "a stream handler reports its cost on its stream's context",
			opt:    grpclimit.WithReportedCost(),
			stream: func(ss grpc.ServerStream) error { return report(ss.Context(), 4) },
			left:   6,
		},
		{
			name: "a stream handler adds to its cost as it sends",
			opt:  grpclimit.WithReportedCost(),
			stream: func(ss grpc.ServerStream) error {
				guard.AddCost(ss.Context(), 2)
				guard.AddCost(ss.Context(), 1)
				return nil
			},
			left: 7,
		},
		{
			name:  "WithRefundOn(ServerErrors) refunds an RPC that ends with Unavailable",
			opt:   grpclimit.WithRefundOn(guard.ServerErrors),
			unary: func(context.Context) error { return status.Error(codes.Unavailable, "backend down") },
			code:  codes.Unavailable,
			left:  10,
		},
		{
			name:  "WithRefundOn(ServerErrors) refunds an RPC that ends with a plain error, Unknown",
			opt:   grpclimit.WithRefundOn(guard.ServerErrors),
			unary: func(context.Context) error { return errors.New("boom") },
			code:  codes.Unknown,
			left:  10,
		},
		{
			name:   "WithRefundOn(ServerErrors) refunds a stream that ends with Internal",
			opt:    grpclimit.WithRefundOn(guard.ServerErrors),
			stream: func(grpc.ServerStream) error { return status.Error(codes.Internal, "oops") },
			code:   codes.Internal,
			left:   10,
		},
		{
			name:  "WithRefundOn(ServerErrors) keeps the cost of an RPC that ends with InvalidArgument",
			opt:   grpclimit.WithRefundOn(guard.ServerErrors),
			unary: func(context.Context) error { return status.Error(codes.InvalidArgument, "bad") },
			code:  codes.InvalidArgument,
			left:  9,
		},
		{
			name:  "WithResponseCost sees the size of a unary response",
			opt:   grpclimit.WithResponseCost(func(r guard.Result) int64 { return r.Bytes / 100 }),
			unary: func(context.Context) error { return nil },
			size:  300, // a payload of 300 bytes is a message of a little more
			left:  7,
		},
		{
			name:   "WithResponseCost sees the size of the messages a stream sent",
			opt:    grpclimit.WithResponseCost(func(r guard.Result) int64 { return r.Bytes / 100 }),
			stream: func(grpc.ServerStream) error { return nil },
			size:   200, // two messages of 200 bytes and a little more
			left:   6,
		},
		{
			name:  "WithResponseCost sees the status of the RPC",
			opt:   grpclimit.WithResponseCost(func(r guard.Result) int64 { return int64(r.Status / 100) }),
			unary: func(context.Context) error { return status.Error(codes.ResourceExhausted, "app's own") },
			code:  codes.ResourceExhausted,
			left:  6, // 429
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := guardtest.NewLimiter(t, nil, perMinute(10, "per-minute"))
			svc := &service{unary: c.unary, stream: c.stream}
			cl := serve(t, client, svc,
				grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, c.opt)),
				grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim, c.opt)))
			var r reply
			if c.stream != nil {
				r = callStream(t, cl, []int32{c.size, c.size})
			} else {
				r = callUnary(t, cl, c.size)
			}
			if r.code() != c.code {
				t.Fatalf("code %v (%v), want %v", r.code(), r.err, c.code)
			}
			if n := remaining(t, lim, client); n != c.left {
				t.Errorf("remaining = %d, want %d", n, c.left)
			}
		})
	}
}

// report reports n as the RPC's cost, and fails the RPC if ctx has no
// cost slot.
func report(ctx context.Context, n int64) error {
	if !guard.ReportCost(ctx, n) {
		return status.Error(codes.FailedPrecondition, "the handler's context carries no cost slot")
	}
	return nil
}

func TestDryRunDecidesButNeverBlocks(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(1, "per-minute"))
	var denied atomic.Int64
	svc := &service{}
	c := unaryServer(t, svc, grpclimit.UnaryServerInterceptor(lim, grpclimit.WithDryRun(true),
		grpclimit.WithOnDenied(func(_ context.Context, m string, d *guard.Denial) {
			if d.DryRun && m == unaryMethod {
				denied.Add(1)
			}
		})))
	for range 3 {
		r := callUnary(t, c, 0)
		if r.err != nil {
			t.Fatalf("a dry run failed an RPC: %v", r.err)
		}
		if ra := r.md("retry-after"); len(ra) != 0 {
			t.Errorf("retry-after %q in dry run, want none", ra)
		}
	}
	if n := svc.calls.Load(); n != 3 {
		t.Errorf("the handler ran %d times, want 3", n)
	}
	if n := denied.Load(); n != 2 {
		t.Errorf("OnDenied saw %d dry-run denials, want 2", n)
	}
}

func TestSkippedRPCsAreNotLimited(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(1, "per-minute"))
	svc := &service{}
	c := unaryServer(t, svc, grpclimit.UnaryServerInterceptor(lim,
		grpclimit.WithSkip(func(_ context.Context, m string) bool { return m == emptyMethod })))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		var hdr metadata.MD
		if _, err := c.EmptyCall(ctx, &testpb.Empty{}, grpc.Header(&hdr)); err != nil {
			t.Fatalf("a skipped method failed: %v", err)
		}
		if len(hdr.Get("ratelimit-policy")) != 0 {
			t.Errorf("a skipped method got ratelimit-policy %q, want none", hdr.Get("ratelimit-policy"))
		}
	}
	if n := remaining(t, lim, client); n != 1 {
		t.Errorf("remaining = %d, want 1: skipped RPCs cost nothing", n)
	}
	if r := callUnary(t, c, 0); r.err != nil {
		t.Errorf("the first limited RPC failed: %v", r.err)
	}
}

// An RPC admitted just before a window ends that fails after the next
// window filled is refunded to its own window, which is gone: the new
// window stays at its quota (see guardtest.RunSlowRefund).
func TestASlowFailedRPCIsRefundedToItsOwnWindow(t *testing.T) {
	clock := guardtest.NewClock(guardtest.Epoch.Add(59500 * time.Millisecond))
	ms := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	t.Cleanup(func() { ms.Close() })
	lim, err := core.New(ms, perMinute(2, "per-minute"), core.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var slow atomic.Bool
	slow.Store(true)
	svc := &service{unary: func(context.Context) error {
		if slow.CompareAndSwap(true, false) {
			close(entered)
			<-release
			return status.Error(codes.Unavailable, "backend down")
		}
		return nil
	}}
	opt := grpclimit.WithRefundOn(guard.ServerErrors)
	cl := serve(t, client, svc, grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, opt)))
	first := make(chan reply)
	go func() { first <- callUnary(t, cl, 0) }()
	<-entered
	clock.Advance(time.Second) // into [60 s, 120 s)
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		if r := callUnary(t, cl, 0); r.code() != want {
			t.Fatalf("RPC %d at 60.5 s: code %v, want %v", i+1, r.code(), want)
		}
	}
	close(release)
	if r := <-first; r.code() != codes.Unavailable {
		t.Fatalf("the slow RPC: code %v, want Unavailable", r.code())
	}
	if r := callUnary(t, cl, 0); r.code() != codes.ResourceExhausted {
		t.Errorf("after the slow RPC's refund: code %v, want ResourceExhausted (the new window holds its quota of 2)", r.code())
	}
}
