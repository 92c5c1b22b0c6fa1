package main

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// grpcService describes demo.v1.Greeter, as protoc-gen-go-grpc would from
//
//	service Greeter {
//	  rpc Greet(google.protobuf.StringValue) returns (google.protobuf.StringValue);
//	  rpc Search(google.protobuf.StringValue) returns (google.protobuf.StringValue);
//	  rpc Count(google.protobuf.Int64Value) returns (stream google.protobuf.Int64Value);
//	}
var grpcService = grpc.ServiceDesc{
	ServiceName: "demo.v1.Greeter",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Greet", Handler: unaryHandler(methodGreet, greeter.Greet)},
		{MethodName: "Search", Handler: unaryHandler(methodSearch, greeter.Search)},
	},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Count",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			n := new(wrapperspb.Int64Value)
			if err := stream.RecvMsg(n); err != nil {
				return err
			}
			return srv.(greeter).Count(n, stream)
		},
	}},
}

// unaryHandler returns the grpc.MethodDesc handler of a unary method: it
// decodes the request and runs fn behind the server's interceptors.
func unaryHandler(fullMethod string, fn func(greeter, context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		handler := func(ctx context.Context, req any) (any, error) {
			return fn(srv.(greeter), ctx, req.(*wrapperspb.StringValue))
		}
		if interceptor == nil {
			return handler(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}, handler)
	}
}

// client is a client of demo.v1.Greeter.
type client struct{ *grpc.ClientConn }

// dial returns a client of the server at addr, without TLS.
func dial(addr string) (client, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	return client{conn}, err
}

// answer is what the client saw of an RPC: its status and the server's
// metadata.
type answer struct {
	err    error
	status *status.Status
	header metadata.MD
	values []string // the messages received
}

// retryDelay returns the delay of the status's google.rpc.RetryInfo
// detail, or 0 when it has none. status.Details decodes each detail into
// its Go type, registered by the package that defines it (errdetails).
func (a answer) retryDelay() time.Duration {
	for _, d := range a.status.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// violations returns the status's google.rpc.QuotaFailure violations, one
// per violated policy: its QuotaId (the policy's name, as the ratelimit
// metadata names it) and its Description ("quota exceeded", or why the
// cost can never pass).
func (a answer) violations() []string {
	var out []string
	for _, d := range a.status.Details() {
		if qf, ok := d.(*errdetails.QuotaFailure); ok {
			for _, v := range qf.GetViolations() {
				out = append(out, v.GetQuotaId()+": "+v.GetDescription())
			}
		}
	}
	return out
}

func (c client) unary(ctx context.Context, method, arg string) answer {
	var a answer
	out := new(wrapperspb.StringValue)
	a.err = c.Invoke(ctx, method, wrapperspb.String(arg), out, grpc.Header(&a.header))
	a.status = status.Convert(a.err)
	if a.err == nil {
		a.values = []string{out.GetValue()}
	}
	return a
}

func (c client) greet(ctx context.Context, name string) answer {
	return c.unary(ctx, methodGreet, name)
}

func (c client) search(ctx context.Context, q string) answer {
	return c.unary(ctx, methodSearch, q)
}

// count calls Count(n) and reads the stream to its end.
func (c client) count(ctx context.Context, n int64) answer {
	var a answer
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.NewStream(ctx, &grpcService.Streams[0], methodCount)
	if err == nil {
		err = st.SendMsg(wrapperspb.Int64(n))
	}
	if err == nil {
		err = st.CloseSend()
	}
	for err == nil {
		m := new(wrapperspb.Int64Value)
		if err = st.RecvMsg(m); err == nil {
			a.values = append(a.values, strconv.FormatInt(m.GetValue(), 10))
		}
	}
	if st != nil {
		a.header, _ = st.Header()
	}
	if !errors.Is(err, io.EOF) {
		a.err = err
	}
	a.status = status.Convert(a.err)
	return a
}
