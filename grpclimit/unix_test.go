package grpclimit_test

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// A proxy on the same host that forwards RPCs over a Unix socket, trusted
// with keyfuncs.TrustUnixSocket: its x-forwarded-for metadata names the
// client, over a real socket, whether the peer reads as "@" or as ""
// (macOS, the BSDs). Whether the RPC came over a socket is the server's
// end of the connection: a TCP client whose address reads as a socket's,
// and a peer that is no address and no socket (bufconn's), stay
// untrusted.
func TestAProxyOnAUnixSocket(t *testing.T) {
	trust := grpclimit.WithKey(keyfuncs.IP(keyfuncs.TrustUnixSocket()))
	// client serves on a listener of network whose connections report
	// the peer remote (nil: their own), and returns a client of it.
	client := func(t *testing.T, network string, remote net.Addr) testgrpc.TestServiceClient {
		l, dial := guardtest.Listen(t, network, remote)
		lim := guardtest.NewLimiter(t, nil, perMinute(1, "per-minute"))
		return serveOn(t, l, dial, &service{}, grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, trust)))
	}
	call := func(t *testing.T, c testgrpc.TestServiceClient, xff string) reply {
		t.Helper()
		var kv []string
		if xff != "" {
			kv = []string{"x-forwarded-for", xff}
		}
		return callUnary(t, c, 0, kv...)
	}
	trusted := func(t *testing.T, c testgrpc.TestServiceClient) {
		for i, s := range []struct {
			xff  string
			want codes.Code
		}{
			{"198.51.100.1", codes.OK},
			{"6.6.6.6, 198.51.100.1", codes.ResourceExhausted},
			{"198.51.100.2", codes.OK},
			{"", codes.Internal},
		} {
			if r := call(t, c, s.xff); r.code() != s.want {
				t.Errorf("RPC %d, x-forwarded-for %q: %v (%v), want %v", i, s.xff, r.code(), r.err, s.want)
			}
		}
	}
	t.Run("trusted", func(t *testing.T) { trusted(t, client(t, "unix", nil)) })
	t.Run("trusted, the peer read as empty", func(t *testing.T) {
		trusted(t, client(t, "unix", &net.UnixAddr{Name: "", Net: "unix"}))
	})
	t.Run("a TCP connection whose peer reads as a socket's is not one", func(t *testing.T) {
		if r := call(t, client(t, "tcp", &net.UnixAddr{Name: "@", Net: "unix"}), "198.51.100.3"); r.code() != codes.Internal {
			t.Errorf("%v (%v), want Internal", r.code(), r.err)
		}
	})
	t.Run("bufconn is not a socket", func(t *testing.T) {
		lim := guardtest.NewLimiter(t, nil, perMinute(1, "per-minute"))
		c := serve(t, "", &service{}, grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, trust)))
		if r := call(t, c, "198.51.100.3"); r.code() != codes.Internal {
			t.Errorf("%v (%v), want Internal", r.code(), r.err)
		}
	})
}
