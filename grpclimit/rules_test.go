package grpclimit_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

const bothPolicies = `"per-ip";q=10;w=60, "per-user";q=1;w=60`

// passThrough is an interceptor of someone else's, between two of ours.
func passThrough(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(ctx, req)
}

func passThroughStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, ss)
}

// TestALaterDenialRefundsTheEarlierCharges runs a per-IP limit and a
// per-user one, as two rules of one interceptor and as two interceptors
// chained with another between them: the second RPC of the user is denied
// by the per-user limit, and the per-IP limit gets its unit back.
func TestALaterDenialRefundsTheEarlierCharges(t *testing.T) {
	user := keyfuncs.Header("x-user")
	for _, c := range []struct {
		name   string
		server func(t *testing.T, ipLim, userLim *core.Limiter, svc *service) func() reply
	}{
		{"two rules of a unary interceptor", func(t *testing.T, ipLim, userLim *core.Limiter, svc *service) func() reply {
			cl := unaryServer(t, svc, grpclimit.UnaryServerInterceptor(ipLim, grpclimit.WithRule(userLim, user)))
			return func() reply { return callUnary(t, cl, 0, "x-user", "u1") }
		}},
		{"two rules of a stream interceptor", func(t *testing.T, ipLim, userLim *core.Limiter, svc *service) func() reply {
			cl := streamServer(t, svc, grpclimit.StreamServerInterceptor(ipLim, grpclimit.WithRule(userLim, user)))
			return func() reply { return callStream(t, cl, []int32{1}, "x-user", "u1") }
		}},
		{"two unary interceptors chained", func(t *testing.T, ipLim, userLim *core.Limiter, svc *service) func() reply {
			cl := unaryServer(t, svc,
				grpclimit.UnaryServerInterceptor(ipLim), passThrough,
				grpclimit.UnaryServerInterceptor(userLim, grpclimit.WithKey(user)))
			return func() reply { return callUnary(t, cl, 0, "x-user", "u1") }
		}},
		{"two stream interceptors chained", func(t *testing.T, ipLim, userLim *core.Limiter, svc *service) func() reply {
			cl := streamServer(t, svc,
				grpclimit.StreamServerInterceptor(ipLim), passThroughStream,
				grpclimit.StreamServerInterceptor(userLim, grpclimit.WithKey(user)))
			return func() reply { return callStream(t, cl, []int32{1}, "x-user", "u1") }
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ipLim := guardtest.NewLimiter(t, nil, perMinute(10, "per-ip"))
			userLim := guardtest.NewLimiter(t, nil, perMinute(1, "per-user"))
			svc := &service{}
			call := c.server(t, ipLim, userLim, svc)

			r := call()
			if r.err != nil {
				t.Fatalf("first RPC: %v", r.err)
			}
			checkOnce(t, r, "ratelimit-policy", bothPolicies)
			checkOnce(t, r, "ratelimit", `"per-ip";r=9;t=60, "per-user";r=0;t=60`)

			r = call()
			if r.code() != codes.ResourceExhausted {
				t.Fatalf("second RPC: code %v (%v), want ResourceExhausted", r.code(), r.err)
			}
			if got := quotaIDs(r.err); !slices.Equal(got, []string{"per-user"}) {
				t.Errorf("QuotaFailure quota IDs %q, want [per-user]", got)
			}
			checkOnce(t, r, "ratelimit-policy", bothPolicies)
			checkOnce(t, r, "ratelimit", `"per-ip";r=9;t=60, "per-user";r=0;t=60`) // the refund shows
			checkOnce(t, r, "retry-after", "60")

			if n := remaining(t, ipLim, client); n != 9 {
				t.Errorf("per-ip remaining = %d, want 9: the denied RPC's unit is refunded", n)
			}
			if n := remaining(t, userLim, "u1"); n != 0 {
				t.Errorf("per-user remaining = %d, want 0", n)
			}
			if n := svc.calls.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
		})
	}
}

// checkOnce checks that the RPC's header metadata holds key once, with
// value want, and its trailers not at all.
func checkOnce(t *testing.T, r reply, key, want string) {
	t.Helper()
	if got := r.header.Get(key); !slices.Equal(got, []string{want}) {
		t.Errorf("header %s = %q, want [%q]", key, got, want)
	}
	if got := r.trailer.Get(key); len(got) != 0 {
		t.Errorf("trailer %s = %q, want none", key, got)
	}
}

func TestChainedInterceptorsChargeALimiterStateOnce(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(10, "per-minute"))
	c := serve(t, client, &service{},
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim), passThrough, grpclimit.UnaryServerInterceptor(lim)),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim), grpclimit.StreamServerInterceptor(lim)))
	for _, s := range []struct {
		name string
		call func() reply
		left int64
	}{
		{"a unary RPC is charged once", func() reply { return callUnary(t, c, 0) }, 9},
		{"a stream is charged once", func() reply { return callStream(t, c, []int32{1}) }, 8},
	} {
		t.Run(s.name, func(t *testing.T) {
			r := s.call()
			if r.err != nil {
				t.Fatal(r.err)
			}
			if n := remaining(t, lim, client); n != s.left {
				t.Errorf("remaining = %d, want %d", n, s.left)
			}
			checkOnce(t, r, "ratelimit-policy", `"per-minute";q=10;w=60`)
		})
	}
}

func TestAnOuterDenialNeverReachesTheInnerInterceptor(t *testing.T) {
	outer := guardtest.NewLimiter(t, nil, perMinute(1, "per-ip"))
	inner := guardtest.NewLimiter(t, nil, perMinute(10, "per-user"))
	svc := &service{}
	c := unaryServer(t, svc, grpclimit.UnaryServerInterceptor(outer), grpclimit.UnaryServerInterceptor(inner, grpclimit.WithKey(keyfuncs.Header("x-user"))))
	callUnary(t, c, 0, "x-user", "u1")
	r := callUnary(t, c, 0, "x-user", "u1")
	if r.code() != codes.ResourceExhausted {
		t.Fatalf("code %v (%v), want ResourceExhausted", r.code(), r.err)
	}
	if n := remaining(t, inner, "u1"); n != 9 {
		t.Errorf("per-user remaining = %d, want 9: the inner interceptor never saw the denied RPC", n)
	}
	// The 429 lists the policies of the interceptor inside, learnt from
	// the method's last RPC that passed, as every response of the method
	// does.
	checkOnce(t, r, "ratelimit-policy", `"per-ip";q=1;w=60, "per-user";q=10;w=60`)
}

// fakeTransport is a grpc.ServerTransportStream of an RPC served in
// process.
type fakeTransport struct{ header metadata.MD }

func (f *fakeTransport) Method() string { return unaryMethod }
func (f *fakeTransport) SetHeader(md metadata.MD) error {
	f.header = metadata.Join(f.header, md)
	return nil
}
func (f *fakeTransport) SendHeader(md metadata.MD) error { return f.SetHeader(md) }
func (f *fakeTransport) SetTrailer(metadata.MD) error    { return nil }

// valueTransport is a fakeTransport passed by value: its map makes it a
// type that cannot be compared.
type valueTransport struct{ header metadata.MD }

func (valueTransport) Method() string               { return unaryMethod }
func (valueTransport) SetHeader(metadata.MD) error  { return nil }
func (valueTransport) SendHeader(metadata.MD) error { return nil }
func (valueTransport) SetTrailer(metadata.MD) error { return nil }

// wrappedTransport is a comparable struct type whose field may hold a
// stream that cannot be compared.
type wrappedTransport struct{ grpc.ServerTransportStream }

// TestAnotherRPCServedWithinAHandlerIsADecisionOfItsOwn calls the
// interceptor from within a handler of its own, for another RPC served in
// process on the handler's context: the inner RPC does not join the outer
// one's chain, and is charged on its own.
func TestAnotherRPCServedWithinAHandlerIsADecisionOfItsOwn(t *testing.T) {
	for _, c := range []struct {
		name         string
		outer, inner grpc.ServerTransportStream
	}{
		{"streams that are pointers", &fakeTransport{}, &fakeTransport{}},
		{"streams of a type that cannot be compared", valueTransport{}, valueTransport{}},
		// == compares the field, and panics.
		{"streams of a comparable type holding ones that cannot be", wrappedTransport{valueTransport{}}, wrappedTransport{valueTransport{}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := guardtest.NewLimiter(t, nil, perMinute(10, "per-minute"))
			in := grpclimit.UnaryServerInterceptor(lim, grpclimit.WithKey(keyfuncs.Static("k")))
			info := &grpc.UnaryServerInfo{FullMethod: unaryMethod}
			ctx := grpc.NewContextWithServerTransportStream(context.Background(), c.outer)
			_, err := in(ctx, nil, info, func(ctx context.Context, _ any) (any, error) {
				return in(grpc.NewContextWithServerTransportStream(ctx, c.inner), nil, info, func(context.Context, any) (any, error) {
					return nil, nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := remaining(t, lim, "k"); n != 8 {
				t.Errorf("remaining = %d, want 8: two RPCs, each charged", n)
			}
		})
	}
}
