package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/keyfuncs"
)

// A server whose RPCs are limited per API key (metadata x-api-key) to 2
// a minute, over an in-memory connection; the service is grpc-go's health
// service, standing in for yours.
func Example() {
	clock := core.ClockFunc(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, err := core.New(store, core.WithClock(clock), core.PerMinute(2).WithAlgorithm(core.FixedWindow).Named("per-minute"))
	if err != nil {
		panic(err)
	}

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		grpclimit.UnaryServerInterceptor(lim, grpclimit.WithKey(keyfuncs.Header("x-api-key"))),
	))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-42")
	for range 3 {
		var md metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		st := status.Convert(err)
		fmt.Println(st.Code(), md.Get("ratelimit"), md.Get("retry-after"))
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Println("retry in", ri.GetRetryDelay().AsDuration())
			}
		}
	}
	// Output:
	// OK ["per-minute";r=1;t=60] []
	// OK ["per-minute";r=0;t=60] []
	// ResourceExhausted ["per-minute";r=0;t=60] [60]
	// retry in 1m0s
}

// A cost per method, a stream limited with the same limiter, and health
// checks left alone.
func ExampleWithMethodCosts() {
	lim, err := core.New(memstore.New(), core.PerSecond(10), core.PerMinute(100))
	if err != nil {
		panic(err)
	}
	opts := []grpclimit.Option{
		grpclimit.WithMethodCosts(map[string]int64{
			"/search.v1.Search/Query":  5,
			"/search.v1.Search/Export": 50, // a stream: charged once, when it starts
		}, 1),
		grpclimit.WithSkip(func(_ context.Context, fullMethod string) bool {
			return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/")
		}),
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, opts...)),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim, opts...)),
	)
	_ = srv
}
