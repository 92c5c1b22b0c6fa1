package keyfuncs

import (
	"errors"
	"net/netip"
	"testing"
)

// addrRequest is a PeerAddrRequest whose RemoteAddr is the fakeRequest's.
type addrRequest struct {
	*fakeRequest
	peer netip.AddrPort
	ok   bool
}

func (a addrRequest) PeerAddr() (netip.AddrPort, bool) { return a.peer, a.ok }

var _ PeerAddrRequest = addrRequest{}

// peerAddrRequest returns a request from peer, reported by PeerAddr only:
// its RemoteAddr is empty, which IP would refuse, so a key proves that IP
// read PeerAddr. The headers are as for peerRequest.
func peerAddrRequest(peer netip.AddrPort, nameValues ...string) addrRequest {
	return addrRequest{fakeRequest: peerRequest("", nameValues...), peer: peer, ok: true}
}

func TestIPPeerAddrGivesTheKeysOfRemoteAddr(t *testing.T) {
	peers := []struct {
		name   string
		remote string
		peer   netip.AddrPort
	}{
		{"an IPv4 peer", "203.0.113.7:5678", netip.MustParseAddrPort("203.0.113.7:5678")},
		{"an IPv4-mapped IPv6 peer", "[::ffff:203.0.113.7]:443", netip.MustParseAddrPort("[::ffff:203.0.113.7]:443")},
		{"an IPv6 peer", "[2001:db8:1:2:3:4:5:6]:443", netip.MustParseAddrPort("[2001:db8:1:2:3:4:5:6]:443")},
		{"an IPv6 peer with a zone", "[fe80::1%eth0]:443", netip.MustParseAddrPort("[fe80::1%eth0]:443")},
		{"a trusted IPv4 proxy", "10.0.0.1:443", netip.MustParseAddrPort("10.0.0.1:443")},
		{"a trusted IPv4-mapped proxy", "[::ffff:10.0.0.1]:443", netip.MustParseAddrPort("[::ffff:10.0.0.1]:443")},
		{"a trusted IPv6 proxy with a zone", "[fd00::1%eth1]:443", netip.MustParseAddrPort("[fd00::1%eth1]:443")},
	}
	configs := []struct {
		name string
		opts []IPOption
	}{
		{"the defaults", nil},
		{"IPv4Prefix(24)", []IPOption{IPv4Prefix(24)}},
		{"IPv6Prefix(128)", []IPOption{IPv6Prefix(128)}},
		{"IPv6Prefix(48)", []IPOption{IPv6Prefix(48)}},
		{"trusted proxies and X-Forwarded-For", xffConf},
		{"trusted proxies and Forwarded", fwdConf},
		{"trusted proxies and X-Real-IP", realIPConf},
		{"trusted proxies, X-Forwarded-For and IPv6Prefix(56)", append([]IPOption{IPv6Prefix(56)}, xffConf...)},
	}
	headers := []string{
		"X-Forwarded-For", "6.6.6.6, 2001:db8:aa:bb::1",
		"Forwarded", `for="[2001:db8:cc::1]:80", for=10.0.0.2`,
		"X-Real-IP", "198.51.100.3",
	}
	for _, c := range configs {
		fn := IP(c.opts...)
		for _, p := range peers {
			t.Run(p.name+" with "+c.name+" has the same key from PeerAddr as from RemoteAddr", func(t *testing.T) {
				want, err := fn(peerRequest(p.remote, headers...))
				if err != nil {
					t.Fatalf("IP(%q) = %q, %v; want a key", p.remote, want, err)
				}
				if got, err := fn(peerAddrRequest(p.peer, headers...)); err != nil || got != want {
					t.Errorf("IP(PeerAddr %v) = %q, %v; want %q, as IP(%q)", p.peer, got, err, want, p.remote)
				}
			})
		}
	}
}

func TestIPPeerAddr(t *testing.T) {
	xff := []string{"X-Forwarded-For", "6.6.6.6, 198.51.100.1"}
	tests := []struct {
		name    string
		opts    []IPOption
		req     addrRequest
		want    string
		wantErr error
	}{
		{name: "an IPv4 peer is keyed by its address", req: peerAddrRequest(netip.MustParseAddrPort("203.0.113.7:5678")), want: "203.0.113.7"},
		{name: "an IPv4-mapped peer is unmapped", req: peerAddrRequest(netip.MustParseAddrPort("[::ffff:203.0.113.7]:1")), want: "203.0.113.7"},
		{name: "an IPv6 peer with a zone is keyed by its /64 without the zone", req: peerAddrRequest(netip.MustParseAddrPort("[fe80::1%eth0]:1")), want: "fe80::/64"},
		{name: "a trusted peer's X-Forwarded-For is read", opts: xffConf, req: peerAddrRequest(netip.MustParseAddrPort("10.0.0.1:443"), xff...), want: "198.51.100.1"},
		{name: "a trusted IPv4-mapped peer's X-Forwarded-For is read", opts: xffConf, req: peerAddrRequest(netip.MustParseAddrPort("[::ffff:10.0.0.1]:443"), xff...), want: "198.51.100.1"},
		{name: "a trusted IPv6 peer with a zone has its X-Forwarded-For read", opts: xffConf, req: peerAddrRequest(netip.MustParseAddrPort("[fd00::1%eth0]:443"), xff...), want: "198.51.100.1"},
		{name: "an untrusted peer's X-Forwarded-For is ignored", opts: xffConf, req: peerAddrRequest(netip.MustParseAddrPort("203.0.113.7:443"), xff...), want: "203.0.113.7"},
		{name: "X-Forwarded-For is ignored when no proxy is trusted", req: peerAddrRequest(netip.MustParseAddrPort("10.0.0.1:443"), xff...), want: "10.0.0.1"},
		{name: "a peer PeerAddr does not know is read from RemoteAddr", req: addrRequest{fakeRequest: peerRequest("198.51.100.9:1"), peer: netip.MustParseAddrPort("203.0.113.7:1")}, want: "198.51.100.9"},
		{name: "an invalid PeerAddr is read from RemoteAddr", req: addrRequest{fakeRequest: peerRequest("198.51.100.9:1"), ok: true}, want: "198.51.100.9"},
		{name: "a peer known to neither is a bad address", req: addrRequest{fakeRequest: peerRequest("")}, wantErr: ErrBadAddress},
		{name: "a peer PeerAddr does not know and RemoteAddr garbles is a bad address", req: addrRequest{fakeRequest: peerRequest("@")}, wantErr: ErrBadAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IP(tt.opts...)(tt.req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("IP(%v, %v, %q) = %q, %v; want error %v", tt.req.peer, tt.req.ok, tt.req.remote, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("IP(%v, %v, %q) = %q, %v; want %q", tt.req.peer, tt.req.ok, tt.req.remote, got, err, tt.want)
			}
		})
	}
}
