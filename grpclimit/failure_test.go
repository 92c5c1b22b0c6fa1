package grpclimit_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// failing returns a Limiter over a store whose every call fails, under
// policy, logging nothing.
func failing(t *testing.T, policy core.FailurePolicy) *core.Limiter {
	t.Helper()
	lim, err := core.New(guardtest.FailingStore{}, perMinute(10, "per-minute"),
		core.WithFailurePolicy(policy), core.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func TestAFailingStore(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy core.FailurePolicy
		code   codes.Code
		calls  int64
	}{
		{"under FailClosed fails the RPC with Unavailable and a generic message", core.FailClosed, codes.Unavailable, 0},
		{"under FailOpen lets the RPC through", core.FailOpen, codes.OK, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := failing(t, c.policy)
			var logged []error
			svc := &service{}
			onErr := grpclimit.WithOnError(func(_ context.Context, _ string, err error) { logged = append(logged, err) })
			cl := serve(t, client, svc,
				grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, onErr)),
				grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim, onErr)))
			for _, r := range []reply{callUnary(t, cl, 0), callStream(t, cl, []int32{1})} {
				if r.code() != c.code {
					t.Fatalf("code %v (%v), want %v", r.code(), r.err, c.code)
				}
				if r.err != nil {
					if msg := status.Convert(r.err).Message(); msg != "rate limiter unavailable" {
						t.Errorf("message %q, want %q", msg, "rate limiter unavailable")
					}
					if strings.Contains(r.err.Error(), "10.0.0.7") || strings.Contains(r.err.Error(), "secret") {
						t.Errorf("the client saw the store's error: %v", r.err)
					}
				}
				// An RPC that passes lists the policy, as every other does;
				// there are no numbers to report.
				var policy []string
				if c.code == codes.OK {
					policy = []string{`"per-minute";q=10;w=60`}
				}
				if got := r.header.Get("ratelimit-policy"); !slices.Equal(got, policy) {
					t.Errorf("ratelimit-policy = %q, want %q", got, policy)
				}
				if got := r.md("ratelimit"); len(got) != 0 {
					t.Errorf("ratelimit = %q, want none: the store gave no numbers", got)
				}
			}
			if n := svc.calls.Load(); n != c.calls {
				t.Errorf("the handler ran %d times, want %d", n, c.calls)
			}
			if c.code != codes.OK && (len(logged) != 2 || !errors.Is(logged[0], guardtest.ErrStore)) {
				t.Errorf("OnError saw %v, want the store's error twice", logged)
			}
		})
	}
}

// TestAnRPCWhoseContextEndsEndsWithItsOwnCode calls the interceptors
// directly with a context that ended, over a store that answers nothing
// until then: the RPC ends with Canceled or DeadlineExceeded, as the
// client's end, not with Unavailable as a store failure.
func TestAnRPCWhoseContextEndsEndsWithItsOwnCode(t *testing.T) {
	lim, err := core.New(guardtest.HangingStore{}, perMinute(10, "per-minute"),
		core.WithTimeout(time.Minute), core.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	unary := grpclimit.UnaryServerInterceptor(lim, grpclimit.WithKey(keyfuncs.Static("k")))
	stream := grpclimit.StreamServerInterceptor(lim, grpclimit.WithKey(keyfuncs.Static("k")))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"a cancelled RPC ends with Canceled", cancelled, codes.Canceled},
		{"an RPC past its deadline ends with DeadlineExceeded", expired, codes.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			ran := false
			_, err := unary(c.ctx, nil, &grpc.UnaryServerInfo{FullMethod: unaryMethod}, func(context.Context, any) (any, error) {
				ran = true
				return nil, nil
			})
			if status.Code(err) != c.want {
				t.Errorf("unary: code %v (%v), want %v", status.Code(err), err, c.want)
			}
			err = stream(nil, fakeStream{ctx: c.ctx}, &grpc.StreamServerInfo{FullMethod: streamMethod}, func(any, grpc.ServerStream) error {
				ran = true
				return nil
			})
			if status.Code(err) != c.want {
				t.Errorf("stream: code %v (%v), want %v", status.Code(err), err, c.want)
			}
			if ran {
				t.Error("the handler ran")
			}
		})
	}
}

// fakeStream is a grpc.ServerStream with a context and nothing else.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context  { return s.ctx }
func (fakeStream) SetHeader(metadata.MD) error { return nil }
func (fakeStream) SetTrailer(metadata.MD)      {}
