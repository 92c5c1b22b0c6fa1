package grpclimit_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/grpclimit"
)

// The adaptive limit alone: with a limit of 2, a sheddable RPC is shed
// while a critical one runs, a second critical one is admitted and a
// third shed, with codes.Unavailable and a RetryInfo; panicking handlers
// give their units back.
func TestAdaptiveShedsWithUnavailable(t *testing.T) {
	ad, err := adaptive.New(adaptive.WithInitialLimit(2), adaptive.WithMinLimit(2), adaptive.WithMaxLimit(2),
		adaptive.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	entered, leave := make(chan struct{}), make(chan struct{})
	var panics atomic.Bool
	svc := &service{unary: func(ctx context.Context) error {
		if panics.Load() {
			panic("the handler panics")
		}
		entered <- struct{}{}
		<-leave
		return nil
	}}
	c := unaryServer(t, svc, recoverUnary, grpclimit.UnaryServerInterceptor(nil, grpclimit.WithAdaptive(ad),
		grpclimit.WithPriority(func(ctx context.Context, _ string) adaptive.Priority {
			if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-priority")) > 0 && md.Get("x-priority")[0] == "sheddable" {
				return adaptive.Sheddable
			}
			return adaptive.Critical
		})))
	var wg sync.WaitGroup
	hold := func() {
		wg.Go(func() {
			if r := callUnary(t, c, 0); r.code() != codes.OK {
				t.Errorf("held RPC: code %v (%v), want OK", r.code(), r.err)
			}
		})
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("a critical RPC under the limit never reached its handler")
		}
	}
	shed := func(what string, kv ...string) {
		t.Helper()
		r := callUnary(t, c, 0, kv...)
		if r.code() != codes.Unavailable {
			t.Fatalf("%s: code %v (%v), want Unavailable", what, r.code(), r.err)
		}
		var retry *errdetails.RetryInfo
		for _, d := range status.Convert(r.err).Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				retry = ri
			}
		}
		if retry == nil || retry.GetRetryDelay().AsDuration() != time.Second {
			t.Errorf("%s: RetryInfo %v, want a retry delay of 1s", what, retry)
		}
	}
	hold()
	shed("a sheddable RPC with 1 of 2 in flight", "x-priority", "sheddable")
	hold()
	shed("a critical RPC with 2 of 2 in flight")
	close(leave)
	wg.Wait()
	panics.Store(true)
	for range 4 {
		if r := callUnary(t, c, 0); r.code() != codes.Internal {
			t.Fatalf("a panicking handler: code %v (%v), want Internal from the recovery interceptor", r.code(), r.err)
		}
	}
	if s := ad.Stats(); s.InFlight != 0 || s.Shed != 2 {
		t.Errorf("adaptive limit %+v, want nothing in flight and 2 shed", s)
	}
}
