package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard/guardtest"
)

// The full methods of the test service.
const (
	unaryMethod  = "/grpc.testing.TestService/UnaryCall"
	emptyMethod  = "/grpc.testing.TestService/EmptyCall"
	streamMethod = "/grpc.testing.TestService/StreamingOutputCall"
)

// client is the peer address the tests' clients connect from, unless a
// test says otherwise.
const client = "192.0.2.1"

// service is the TestService behind the interceptors. Each RPC counts
// itself, runs the test's hook when there is one (its error ends the
// RPC), and answers: UnaryCall with a payload of the requested size,
// StreamingOutputCall with one message per response parameter.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	calls  atomic.Int64
	unary  func(ctx context.Context) error
	stream func(ss grpc.ServerStream) error
}

func (s *service) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	s.calls.Add(1)
	if s.unary != nil {
		if err := s.unary(ctx); err != nil {
			return nil, err
		}
	}
	return &testpb.Empty{}, nil
}

func (s *service) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.calls.Add(1)
	if s.unary != nil {
		if err := s.unary(ctx); err != nil {
			return nil, err
		}
	}
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: make([]byte, req.GetResponseSize())}}, nil
}

func (s *service) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
	s.calls.Add(1)
	if s.stream != nil {
		if err := s.stream(ss); err != nil {
			return err
		}
	}
	for _, p := range req.GetResponseParameters() {
		if err := ss.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
	}
	return nil
}

// serve starts a gRPC server with svc and opts on an in-memory listener
// whose connections come from peer (an IP address; "" for bufconn's own
// address, which is not one), and returns a client of it. Both stop with
// t.
func serve(t *testing.T, peer string, svc *service, opts ...grpc.ServerOption) testgrpc.TestServiceClient {
	t.Helper()
	bl := bufconn.Listen(1 << 20)
	var ln net.Listener = bl
	if peer != "" {
		ln = guardtest.WithPeer(bl, net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(peer), 40000)))
	}
	return serveOn(t, ln, bl.DialContext, svc, opts...)
}

// serveOn starts a gRPC server with svc and opts on ln, and returns a
// client of it that connects with dial. Both stop with t.
func serveOn(t *testing.T, ln net.Listener, dial func(context.Context) (net.Conn, error), svc *service, opts ...grpc.ServerOption) testgrpc.TestServiceClient {
	t.Helper()
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, svc)
	go func() { _ = srv.Serve(ln) }()
	conn, err := grpc.NewClient("passthrough:///app",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return dial(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return testgrpc.NewTestServiceClient(conn)
}

// unaryServer serves svc with the unary interceptors ints, from client.
func unaryServer(t *testing.T, svc *service, ints ...grpc.UnaryServerInterceptor) testgrpc.TestServiceClient {
	t.Helper()
	return serve(t, client, svc, grpc.ChainUnaryInterceptor(ints...))
}

// streamServer serves svc with the stream interceptors ints, from client.
func streamServer(t *testing.T, svc *service, ints ...grpc.StreamServerInterceptor) testgrpc.TestServiceClient {
	t.Helper()
	return serve(t, client, svc, grpc.ChainStreamInterceptor(ints...))
}

// reply is what a client saw of an RPC.
type reply struct {
	header, trailer metadata.MD
	err             error
	bytes           int // the payload bytes received
}

// code returns the RPC's status code.
func (r reply) code() codes.Code { return status.Code(r.err) }

// md returns the values of the metadata key, header and trailer.
func (r reply) md(key string) []string { return append(r.header.Get(key), r.trailer.Get(key)...) }

// get returns the single value of the metadata key, or "" when there is
// none; it fails t when there are several.
func (r reply) get(t *testing.T, key string) string {
	t.Helper()
	v := r.md(key)
	switch len(v) {
	case 0:
		return ""
	case 1:
		return v[0]
	}
	t.Fatalf("metadata %s = %q, want one value", key, v)
	return ""
}

// callUnary calls UnaryCall with the metadata pairs kv, asking for size
// payload bytes.
func callUnary(t *testing.T, c testgrpc.TestServiceClient, size int32, kv ...string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), kv...), 10*time.Second)
	defer cancel()
	var r reply
	resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: size}, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
	r.err = err
	if err == nil {
		r.bytes = len(resp.GetPayload().GetBody())
	}
	return r
}

// callStream calls StreamingOutputCall with the metadata pairs kv, asking
// for one message of each of sizes, and reads the stream to its end.
func callStream(t *testing.T, c testgrpc.TestServiceClient, sizes []int32, kv ...string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), kv...), 10*time.Second)
	defer cancel()
	req := &testpb.StreamingOutputCallRequest{}
	for _, n := range sizes {
		req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: n})
	}
	var r reply
	st, err := c.StreamingOutputCall(ctx, req)
	if err != nil {
		r.err = err
		return r
	}
	for {
		m, err := st.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.err = err
			}
			break
		}
		r.bytes += len(m.GetPayload().GetBody())
	}
	r.header, _ = st.Header()
	r.trailer = st.Trailer()
	return r
}

// retryInfo returns the RetryInfo detail of err's status, or nil.
func retryInfo(err error) *errdetails.RetryInfo {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri
		}
	}
	return nil
}

// quotaIDs returns the quota IDs of the QuotaFailure detail of err's
// status, or nil.
func quotaIDs(err error) []string {
	var ids []string
	for _, d := range status.Convert(err).Details() {
		if qf, ok := d.(*errdetails.QuotaFailure); ok {
			for _, v := range qf.GetViolations() {
				ids = append(ids, v.GetQuotaId())
			}
		}
	}
	return ids
}

// remaining returns the units left to key under lim's first limit.
func remaining(t *testing.T, lim *core.Limiter, key string) int64 {
	t.Helper()
	d, err := lim.Peek(context.Background(), key)
	if err != nil {
		t.Fatalf("Peek(%q): %v", key, err)
	}
	if len(d.States) > 0 {
		return d.States[0].Remaining
	}
	return d.Remaining
}

// perMinute is a fixed window of n per minute named name: its numbers
// are exact on the tests' fixed clock.
func perMinute(n int64, name string) core.Limit {
	return core.PerMinute(n).WithAlgorithm(core.FixedWindow).Named(name)
}

// recoverUnary is a recovery interceptor: a panic ends the RPC with
// Internal, as go-grpc-middleware's recovery does.
func recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Error(codes.Internal, "panic")
		}
	}()
	return handler(ctx, req)
}

// recoverStream is recoverUnary for streams.
func recoverStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Error(codes.Internal, "panic")
		}
	}()
	return handler(srv, ss)
}
