package grpclimit

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/tollgate/tollgate/keyfuncs"
)

// textOnly hides PeerAddr: keyfuncs.IP reads its RemoteAddr.
type textOnly struct{ keyfuncs.Request }

// TestPeerAddrKeysAsRemoteAddr checks that keyfuncs.IP gives an RPC the
// same key whether it reads the peer from PeerAddr or parses RemoteAddr.
func TestPeerAddrKeysAsRemoteAddr(t *testing.T) {
	trusted := keyfuncs.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fe80::/10"))
	funcs := map[string]keyfuncs.Func{
		"default":         keyfuncs.IP(),
		"trusted proxies": keyfuncs.IP(trusted),
		"IPv4 /24":        keyfuncs.IP(keyfuncs.IPv4Prefix(24)),
	}
	for _, a := range []*net.TCPAddr{
		{IP: net.ParseIP("203.0.113.9").To4(), Port: 5000},
		{IP: net.ParseIP("203.0.113.9"), Port: 5000}, // 16-byte form
		{IP: net.ParseIP("::ffff:10.0.0.5"), Port: 80},
		{IP: net.ParseIP("10.0.0.5"), Port: 80},
		{IP: net.ParseIP("2001:db8:1:2::7"), Port: 443},
		{IP: net.ParseIP("fe80::1"), Port: 443, Zone: "eth0"},
	} {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: a})
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("x-forwarded-for", "198.51.100.1"))
		x := &request{ctx: ctx, method: "/s/M"}
		if ap, ok := x.PeerAddr(); !ok || ap != a.AddrPort() {
			t.Errorf("PeerAddr() of %v = %v, %v; want %v, true", a, ap, ok, a.AddrPort())
		}
		for name, f := range funcs {
			got, err := f(x)
			want, werr := f(textOnly{x})
			if got != want || (err == nil) != (werr == nil) {
				t.Errorf("%s key of %v = %q, %v from PeerAddr; %q, %v from RemoteAddr %q", name, a, got, err, want, werr, x.RemoteAddr())
			}
		}
	}
}

// TestPeerAddrIsFalseWithoutATCPPeer checks that an RPC without a TCP
// peer leaves keyfuncs.IP to RemoteAddr.
func TestPeerAddrIsFalseWithoutATCPPeer(t *testing.T) {
	for name, ctx := range map[string]context.Context{
		"no peer":     context.Background(),
		"a Unix peer": peer.NewContext(context.Background(), &peer.Peer{Addr: &net.UnixAddr{Name: "/tmp/s", Net: "unix"}}),
		"a nil addr":  peer.NewContext(context.Background(), &peer.Peer{Addr: (*net.TCPAddr)(nil)}),
	} {
		if ap, ok := (&request{ctx: ctx}).PeerAddr(); ok {
			t.Errorf("%s: PeerAddr() = %v, true; want false", name, ap)
		}
	}
}
