package grpclimit_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard/guardtest"
)

// TestTheHandlersOwnMetadataGoesWithTheRateLimitMetadata checks that the
// rate-limit metadata reaches the client however the handler sends its
// own: as header metadata when the interceptors see the headers go out,
// and in the trailers when the handler sends them past them.
func TestTheHandlersOwnMetadataGoesWithTheRateLimitMetadata(t *testing.T) {
	app := metadata.Pairs("x-app", "1")
	for _, c := range []struct {
		name    string
		unary   func(ctx context.Context) error
		stream  func(ss grpc.ServerStream) error
		trailer bool // the rate-limit metadata comes in the trailers
	}{
		{name: "a unary handler that sets its header with grpc.SetHeader", unary: func(ctx context.Context) error {
			return grpc.SetHeader(ctx, app)
		}},
		{name: "a unary handler that sends its header with grpc.SendHeader", trailer: true, unary: func(ctx context.Context) error {
			return grpc.SendHeader(ctx, app)
		}},
		{name: "a stream handler that sets its header on the stream", stream: func(ss grpc.ServerStream) error {
			return ss.SetHeader(app)
		}},
		{name: "a stream handler that sends its header on the stream", stream: func(ss grpc.ServerStream) error {
			return ss.SendHeader(app)
		}},
		{name: "a stream handler that sends its header with grpc.SendHeader on its context", trailer: true, stream: func(ss grpc.ServerStream) error {
			return grpc.SendHeader(ss.Context(), app)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := guardtest.NewLimiter(t, nil, perMinute(2, "per-minute"))
			svc := &service{unary: c.unary, stream: c.stream}
			cl := serve(t, client, svc,
				grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim)),
				grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim)))
			var r reply
			if c.unary != nil {
				r = callUnary(t, cl, 0)
			} else {
				r = callStream(t, cl, []int32{1})
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got := r.header.Get("x-app"); !slices.Equal(got, []string{"1"}) {
				t.Errorf("header x-app = %q, want [1]", got)
			}
			where, other := r.header, r.trailer
			if c.trailer {
				where, other = r.trailer, r.header
			}
			want := `"per-minute";r=1;t=60`
			if got := where.Get("ratelimit"); !slices.Equal(got, []string{want}) {
				t.Errorf("ratelimit = %q, want [%q] (in the trailers: %v)", got, want, c.trailer)
			}
			if got := other.Get("ratelimit"); len(got) != 0 {
				t.Errorf("ratelimit also %q, want it once", got)
			}
		})
	}
}

// TestAStreamSendsItsMetadataWithItsFirstMessage checks that a client of
// a long stream reads the rate-limit metadata as soon as the first
// message arrives, while the handler still runs.
func TestAStreamSendsItsMetadataWithItsFirstMessage(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(2, "per-minute"))
	done := make(chan struct{})
	svc := &service{stream: func(ss grpc.ServerStream) error {
		if err := ss.SendMsg(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
		<-done
		return nil
	}}
	c := streamServer(t, svc, grpclimit.StreamServerInterceptor(lim))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	hdr, err := st.Header()
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hdr.Get("ratelimit"), `"per-minute";r=1;t=60`; !slices.Equal(got, []string{want}) {
		t.Errorf("header ratelimit = %q, want [%q]", got, want)
	}
}
