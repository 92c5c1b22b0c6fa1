package grpclimit_test

import (
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// A proxy on the same host that forwards RPCs over a Unix socket, trusted
// with keyfuncs.TrustUnixSocket: its x-forwarded-for metadata names the
// client, over a real socket. A peer that is no address and no Unix
// socket (bufconn's) stays untrusted.
func TestAProxyOnAUnixSocket(t *testing.T) {
	trust := grpclimit.WithKey(keyfuncs.IP(keyfuncs.TrustUnixSocket()))
	lim := guardtest.NewLimiter(t, nil, perMinute(1, "per-minute"))
	path := filepath.Join(t.TempDir(), "app.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	svc := &service{}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, trust)))
	testgrpc.RegisterTestServiceServer(srv, svc)
	go func() { _ = srv.Serve(l) }()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	c := testgrpc.NewTestServiceClient(conn)
	for i, s := range []struct {
		xff  string
		want codes.Code
	}{
		{"198.51.100.1", codes.OK},
		{"6.6.6.6, 198.51.100.1", codes.ResourceExhausted},
		{"198.51.100.2", codes.OK},
		{"", codes.Internal},
	} {
		var kv []string
		if s.xff != "" {
			kv = []string{"x-forwarded-for", s.xff}
		}
		if r := callUnary(t, c, 0, kv...); r.code() != s.want {
			t.Errorf("RPC %d, x-forwarded-for %q: %v (%v), want %v", i, s.xff, r.code(), r.err, s.want)
		}
	}

	bufc := serve(t, "", &service{}, grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, trust)))
	if r := callUnary(t, bufc, 0, "x-forwarded-for", "198.51.100.3"); r.code() != codes.Internal {
		t.Errorf("a bufconn peer under TrustUnixSocket: %v (%v), want Internal", r.code(), r.err)
	}
}
