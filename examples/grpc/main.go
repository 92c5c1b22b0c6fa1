// Command grpc is the gRPC quickstart: a server whose every RPC is limited
// per client IP, a costly method that charges 5 units of a limiter of its
// own, and a streaming method decided once per stream; and a client that
// calls it until it is denied, and prints what a denial carries.
//
//	go run ./grpc                           # serves on 127.0.0.1:50051 (-addr, or env ADDR)
//	go run ./grpc -call 127.0.0.1:50051     # in another terminal: the client
//
// The service, demo.v1.Greeter, is proto/greeter.proto, described by hand
// (grpcService in service.go, protoFile in descriptor.go) so that the
// example needs no protoc: generated code does the same for your
// services, and the interceptors are set up the same way. The server
// serves reflection, so grpcurl needs no file:
//
//	grpcurl -plaintext 127.0.0.1:50051 describe demo.v1.Greeter
//	grpcurl -plaintext -d '"world"' 127.0.0.1:50051 demo.v1.Greeter/Greet
//
// A denial is ResourceExhausted with two details, google.rpc.RetryInfo
// (when to retry) and google.rpc.QuotaFailure (which policies were
// violated): callServer shows how a Go client decodes them
// (answer.retryDelay and answer.violations in service.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/grpclimit"
)

// The full methods of the demo.v1.Greeter service.
const (
	methodGreet  = "/demo.v1.Greeter/Greet"
	methodSearch = "/demo.v1.Greeter/Search"
	methodCount  = "/demo.v1.Greeter/Count"
)

// newServer returns the gRPC server and a function that releases its
// store.
func newServer() (*grpc.Server, func(), error) {
	// The server-wide limits: 10 RPCs per second and 100 per minute, per
	// client IP, both at once; a stream counts once, when it starts.
	store := memstore.New()
	lim, err := core.New(store, core.PerSecond(10), core.PerMinute(100))
	if err != nil {
		return nil, nil, err
	}
	// Search's own limit, on the same store: 20 units per minute, and a
	// search costs 5.
	searchLim, err := core.New(store, core.PerMinute(20).Named("search"))
	if err != nil {
		return nil, nil, err
	}

	// Every RPC is keyed by client IP: the peer address of the connection.
	// Behind a proxy that forwards gRPC, trust its addresses, and the client
	// address is read from x-forwarded-for when, and only when, the peer is
	// one:
	//
	//	grpclimit.WithKey(keyfuncs.IP(keyfuncs.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))))
	//
	// The second interceptor limits Search alone. Chained, the two are one
	// decision: a search its limit denies leaves no charge in the
	// server-wide limits, and the metadata lists the policies of both.
	onlySearch := grpclimit.WithSkip(func(_ context.Context, m string) bool { return m != methodSearch })
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(
			grpclimit.UnaryServerInterceptor(lim),
			grpclimit.UnaryServerInterceptor(searchLim, onlySearch, grpclimit.WithCost(5)),
		),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim)),
	)
	srv.RegisterService(&grpcService, greeter{})
	// Reflection, so that grpcurl works without the .proto
	// (proto/greeter.proto, for clients that want one).
	if err := registerReflection(srv); err != nil {
		store.Close()
		return nil, nil, err
	}
	return srv, func() { store.Close() }, nil
}

// greeter implements demo.v1.Greeter.
type greeter struct{}

func (greeter) Greet(_ context.Context, name *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return wrapperspb.String("hello, " + name.GetValue()), nil
}

func (greeter) Search(_ context.Context, q *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return wrapperspb.String("results for " + q.GetValue()), nil
}

func (greeter) Count(n *wrapperspb.Int64Value, stream grpc.ServerStream) error {
	for i := int64(1); i <= min(n.GetValue(), 100); i++ {
		if err := stream.SendMsg(wrapperspb.Int64(i)); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	addr := flag.String("addr", envOr("ADDR", "127.0.0.1:50051"), "listen address (env ADDR)")
	call := flag.String("call", "", "act as the client of the server at this address")
	selftest := flag.Bool("selftest", false, "serve on a free loopback port, call it, check the answers and exit")
	flag.Parse()
	switch {
	case *selftest:
		if err := selfTest(); err != nil {
			log.Fatalf("selftest: %v", err)
		}
		fmt.Println("selftest: ok")
		return
	case *call != "":
		if err := callServer(*call); err != nil {
			log.Fatal(err)
		}
		return
	}

	srv, closeStore, err := newServer()
	if err != nil {
		log.Fatal(err)
	}
	defer closeStore()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving gRPC on %s", ln.Addr())
	if err := srv.Serve(ln); err != nil {
		log.Print(err)
	}
}

// callServer greets the server at addr until it is denied, and prints each
// answer, its rate-limit metadata, and the retry delay of the denial.
func callServer(addr string) error {
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := 1; i <= 20; i++ {
		a := c.greet(context.Background(), "world")
		fmt.Printf("%2d %s  ratelimit: %s\n", i, a.status.Code(), strings.Join(a.header.Get("ratelimit"), ""))
		if a.err != nil {
			fmt.Printf("   %s; retry-after: %s\n", a.status.Message(), strings.Join(a.header.Get("retry-after"), ""))
			fmt.Printf("   RetryInfo: retry in %v; QuotaFailure: %s\n", a.retryDelay(), strings.Join(a.violations(), "; "))
			return nil
		}
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
