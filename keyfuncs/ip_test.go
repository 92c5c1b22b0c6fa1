package keyfuncs

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// Addresses used below: 10.0.0.0/8 and fd00::/8 are the trusted proxies,
// everything else is a client. 203.0.113.0/24 and 198.51.100.0/24 are
// documentation ranges; 6.6.6.6 is what a spoofing client claims.
var (
	trustTen   = TrustProxies(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"))
	xffConf    = []IPOption{trustTen}
	fwdConf    = []IPOption{trustTen, FromForwarded()}
	realIPConf = []IPOption{trustTen, FromHeader("x-real-ip")}
	unixConf   = []IPOption{TrustUnixSocket()}
)

func TestIP(t *testing.T) {
	const peer = "10.0.0.1:443" // a trusted proxy
	long := strings.Repeat("10.0.0.9, ", 1000)
	manyTrusted := make([]string, 0, 1000)
	for i := range 1000 {
		manyTrusted = append(manyTrusted, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))
	}
	manyLines := []string{"198.51.100.1"}
	for range 1000 {
		manyLines = append(manyLines, "10.0.0.2")
	}
	tests := []struct {
		name    string
		opts    []IPOption
		req     *fakeRequest
		want    string
		wantErr error
	}{
		// The peer alone.
		{name: "an IPv4 peer with a port is keyed by its address", req: peerRequest("203.0.113.7:5678"), want: "203.0.113.7"},
		{name: "a bare IPv4 peer is keyed by its address", req: peerRequest("203.0.113.7"), want: "203.0.113.7"},
		{name: "an IPv6 peer is keyed by its /64", req: peerRequest("[2001:db8:1:2:3:4:5:6]:443"), want: "2001:db8:1:2::/64"},
		{name: "a bare IPv6 peer is keyed by its /64", req: peerRequest("2001:db8:1:2::1"), want: "2001:db8:1:2::/64"},
		{name: "an IPv6 peer with a zone loses the zone", req: peerRequest("[fe80::1%eth0]:443"), want: "fe80::/64"},
		{name: "a bare IPv6 peer with a zone loses the zone", req: peerRequest("fe80::1%25eth0"), want: "fe80::/64"},
		{name: "an IPv4-mapped peer is unmapped", req: peerRequest("[::ffff:203.0.113.7]:443"), want: "203.0.113.7"},
		{name: "a bare IPv4-mapped peer is unmapped", req: peerRequest("::ffff:203.0.113.7"), want: "203.0.113.7"},
		{name: "an empty remote address is a bad address", req: peerRequest(""), wantErr: ErrBadAddress},
		{name: "a host name is a bad address", req: peerRequest("example.com:80"), wantErr: ErrBadAddress},
		{name: "a port out of range is a bad address", req: peerRequest("203.0.113.7:65536"), wantErr: ErrBadAddress},
		{name: "a bracketed IPv4 peer is a bad address", req: peerRequest("[203.0.113.7]:80"), wantErr: ErrBadAddress},
		{name: "an IPv4 peer with a zone is a bad address", req: peerRequest("203.0.113.7%eth0"), wantErr: ErrBadAddress},
		{name: "an unterminated bracket is a bad address", req: peerRequest("[2001:db8::1:80"), wantErr: ErrBadAddress},
		{name: "a unix socket peer is a bad address", req: peerRequest("@"), wantErr: ErrBadAddress},
		{name: "a unix socket peer's forwarding header is ignored by default", req: peerRequest("@", "X-Forwarded-For", "198.51.100.1"), wantErr: ErrBadAddress},
		{name: "a unix socket peer is not trusted by any prefix", opts: []IPOption{TrustProxies(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))}, req: peerRequest("@", "X-Forwarded-For", "198.51.100.1"), wantErr: ErrBadAddress},
		{name: "a peer with trailing garbage is a bad address", req: peerRequest("203.0.113.7:80x"), wantErr: ErrBadAddress},

		// Spoofing from untrusted peers.
		{name: "X-Forwarded-For is ignored by default", req: peerRequest("203.0.113.7:1", "X-Forwarded-For", "6.6.6.6"), want: "203.0.113.7"},
		{name: "X-Forwarded-For is ignored from a trusted proxy when none is configured", req: peerRequest(peer, "X-Forwarded-For", "6.6.6.6"), want: "10.0.0.1"},
		{name: "X-Forwarded-For from an untrusted peer is ignored", opts: xffConf, req: peerRequest("203.0.113.7:1", "X-Forwarded-For", "6.6.6.6"), want: "203.0.113.7"},
		{name: "X-Forwarded-For naming a trusted proxy from an untrusted peer is ignored", opts: xffConf, req: peerRequest("203.0.113.7:1", "X-Forwarded-For", "10.0.0.2"), want: "203.0.113.7"},
		{name: "Forwarded from an untrusted peer is ignored", opts: fwdConf, req: peerRequest("203.0.113.7:1", "Forwarded", "for=6.6.6.6"), want: "203.0.113.7"},
		{name: "X-Real-IP from an untrusted peer is ignored", opts: realIPConf, req: peerRequest("203.0.113.7:1", "X-Real-IP", "6.6.6.6"), want: "203.0.113.7"},
		{name: "an untrusted IPv6 peer in a trusted IPv4-mapped range is not trusted", opts: xffConf, req: peerRequest("[::10.0.0.1]:1", "X-Forwarded-For", "6.6.6.6"), want: "::/64"},

		// X-Forwarded-For from a trusted proxy.
		{name: "X-Forwarded-For from a trusted proxy names the client", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1"), want: "198.51.100.1"},
		{name: "trusted hops are skipped right to left", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1, 10.0.0.3, 10.0.0.2"), want: "198.51.100.1"},
		{name: "addresses left of the first untrusted one are ignored", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "6.6.6.6, 10.0.0.4, 198.51.100.1, 10.0.0.2"), want: "198.51.100.1"},
		{name: "an X-Forwarded-For without spaces is split", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "6.6.6.6,198.51.100.1,10.0.0.2"), want: "198.51.100.1"},
		{name: "field lines are read last line first", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "6.6.6.6, 198.51.100.9", "X-Forwarded-For", "198.51.100.1, 10.0.0.2"), want: "198.51.100.1"},
		{name: "the walk continues into earlier field lines", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "6.6.6.6, 198.51.100.1", "X-Forwarded-For", "10.0.0.2"), want: "198.51.100.1"},
		{name: "with every hop trusted the leftmost one is the key", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "10.0.0.5, 10.0.0.4"), want: "10.0.0.5"},
		{name: "a trusted proxy without X-Forwarded-For is the key", opts: xffConf, req: peerRequest(peer), want: "10.0.0.1"},
		{name: "an empty X-Forwarded-For leaves the peer as the key", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", ""), want: "10.0.0.1"},
		{name: "empty elements are ignored", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", ",198.51.100.1, ,,10.0.0.2,"), want: "198.51.100.1"},
		{name: "a garbage hop stops the walk at the nearest trusted hop", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1, garbage, 10.0.0.2"), want: "10.0.0.2"},
		{name: "a garbage rightmost hop leaves the peer as the key", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1, garbage"), want: "10.0.0.1"},
		{name: "an unknown hop stops the walk", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1, unknown"), want: "10.0.0.1"},
		{name: "an obfuscated hop stops the walk", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1, _hidden, 10.0.0.2"), want: "10.0.0.2"},
		{name: "a hop with a host name stops the walk", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1, proxy.example"), want: "10.0.0.1"},
		{name: "garbage left of the client is never reached", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "\x00\xff<script>, 198.51.100.1"), want: "198.51.100.1"},
		{name: "a hop with a port loses the port", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1:8080"), want: "198.51.100.1"},
		{name: "a bracketed IPv6 hop with a port is keyed by its /64", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "[2001:db8:1:2::99]:4711"), want: "2001:db8:1:2::/64"},
		{name: "a bare IPv6 hop with a zone is keyed by its /64", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "fe80::1%eth0"), want: "fe80::/64"},
		{name: "an IPv4-mapped hop is unmapped", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "::ffff:198.51.100.1"), want: "198.51.100.1"},
		{name: "an IPv4-mapped trusted hop is skipped", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1, [::ffff:10.0.0.2]:80"), want: "198.51.100.1"},
		{name: "an IPv4-mapped trusted peer is trusted", opts: xffConf, req: peerRequest("[::ffff:10.0.0.1]:443", "X-Forwarded-For", "198.51.100.1"), want: "198.51.100.1"},
		{name: "a trusted IPv6 peer with a zone is trusted", opts: xffConf, req: peerRequest("[fd00::1%eth0]:443", "X-Forwarded-For", "198.51.100.1"), want: "198.51.100.1"},
		{name: "more than MaxHops trusted hops are cut at MaxHops", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1, "+strings.Join(manyTrusted, ", ")), want: manyTrusted[len(manyTrusted)-MaxHops]},
		{name: "1000 garbage hops left of the client are never reached", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", strings.Repeat("junk,", 1000)+"198.51.100.1"), want: "198.51.100.1"},
		{name: "1000 trusted hops after the client cut the walk", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1, "+long), want: "10.0.0.9"},
		{name: "1000 field lines cut the walk", opts: xffConf, req: peerRequest(peer, append([]string{}, interleave("X-Forwarded-For", manyLines)...)...), want: "10.0.0.2"},
		{name: "a 1 MB hop leaves the peer as the key", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", strings.Repeat("1", 1<<20)), want: "10.0.0.1"},
		{name: "a 1 MB header left of the client is never read", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", strings.Repeat("9", 1<<20)+", 198.51.100.1"), want: "198.51.100.1"},
		{name: "1 MB of commas leaves the peer as the key", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1"+strings.Repeat(",", 1<<20)), want: "10.0.0.1"},
		{name: "a hop padded beyond the length bound stops the walk", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "6.6.6.6,"+strings.Repeat(" ", 300)+"198.51.100.1"), want: "10.0.0.1"},
		{name: "a hop of the longest form is read", opts: xffConf, req: peerRequest(peer, "X-Forwarded-For", "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535"), want: "ffff:ffff:ffff:ffff::/64"},

		// A proxy on a Unix socket, trusted.
		{name: "a trusted unix socket peer's X-Forwarded-For names the client", opts: unixConf, req: peerRequest("@", "X-Forwarded-For", "6.6.6.6, 198.51.100.1"), want: "198.51.100.1"},
		{name: "a trusted unix socket peer bound to a path is trusted", opts: unixConf, req: peerRequest("/run/nginx.sock", "X-Forwarded-For", "198.51.100.1"), want: "198.51.100.1"},
		{name: "a trusted unix socket peer bound to an abstract name is trusted", opts: unixConf, req: peerRequest("@proxy", "X-Forwarded-For", "198.51.100.1"), want: "198.51.100.1"},
		{name: "behind a trusted unix socket peer trusted hops are skipped", opts: append([]IPOption{trustTen}, unixConf...), req: peerRequest("@", "X-Forwarded-For", "198.51.100.1, 10.0.0.2"), want: "198.51.100.1"},
		{name: "behind a trusted unix socket peer every hop trusted keys the leftmost", opts: append([]IPOption{trustTen}, unixConf...), req: peerRequest("@", "X-Forwarded-For", "10.0.0.3, 10.0.0.2"), want: "10.0.0.3"},
		{name: "a trusted unix socket peer's IPv6 client is keyed by its /64", opts: unixConf, req: peerRequest("@", "X-Forwarded-For", "[2001:db8:1:2::9]:80"), want: "2001:db8:1:2::/64"},
		{name: "a trusted unix socket peer without X-Forwarded-For names no client", opts: unixConf, req: peerRequest("@"), wantErr: ErrBadAddress},
		{name: "a trusted unix socket peer with a garbage X-Forwarded-For names no client", opts: unixConf, req: peerRequest("@", "X-Forwarded-For", "garbage"), wantErr: ErrBadAddress},
		{name: "a trusted unix socket peer's Forwarded names the client", opts: []IPOption{TrustUnixSocket(), FromForwarded()}, req: peerRequest("@", "Forwarded", "for=198.51.100.1"), want: "198.51.100.1"},
		{name: "a trusted unix socket peer's X-Real-IP names the client", opts: []IPOption{TrustUnixSocket(), FromHeader("X-Real-IP")}, req: peerRequest("@", "X-Real-IP", "198.51.100.1"), want: "198.51.100.1"},
		{name: "a trusted unix socket peer without X-Real-IP names no client", opts: []IPOption{TrustUnixSocket(), FromHeader("X-Real-IP")}, req: peerRequest("@", "X-Forwarded-For", "198.51.100.1"), wantErr: ErrBadAddress},
		{name: "trusting unix sockets leaves an IP peer alone", opts: unixConf, req: peerRequest("203.0.113.7:1", "X-Forwarded-For", "6.6.6.6"), want: "203.0.113.7"},
		{name: "trusting unix sockets leaves a host name a bad address", opts: unixConf, req: peerRequest("example.com:80", "X-Forwarded-For", "198.51.100.1"), wantErr: ErrBadAddress},
		{name: "trusting unix sockets leaves an empty address a bad address", opts: unixConf, req: peerRequest("", "X-Forwarded-For", "198.51.100.1"), wantErr: ErrBadAddress},

		// Forwarded from a trusted proxy.
		{name: "Forwarded for= names the client", opts: fwdConf, req: peerRequest(peer, "Forwarded", "for=198.51.100.1"), want: "198.51.100.1"},
		{name: "Forwarded parameter names are case-insensitive", opts: fwdConf, req: peerRequest(peer, "Forwarded", "For=198.51.100.1;PROTO=https"), want: "198.51.100.1"},
		{name: "a quoted IPv6 for= with a port is read", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for="[2001:db8:cafe::17]:4711"`), want: "2001:db8:cafe::/64"},
		{name: "a quoted IPv4 for= with an obfuscated port is read", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for="198.51.100.1:_p1"`), want: "198.51.100.1"},
		{name: "an unquoted bracketed for= is accepted", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for=[2001:db8:cafe::17]`), want: "2001:db8:cafe::/64"},
		{name: "other parameters are skipped", opts: fwdConf, req: peerRequest(peer, "Forwarded", "proto=http;for=198.51.100.1;by=203.0.113.43;host=example.com"), want: "198.51.100.1"},
		{name: "trusted Forwarded elements are skipped", opts: fwdConf, req: peerRequest(peer, "Forwarded", "for=6.6.6.6, for=198.51.100.1;proto=https, for=10.0.0.2"), want: "198.51.100.1"},
		{name: "Forwarded field lines are read last line first", opts: fwdConf, req: peerRequest(peer, "Forwarded", "for=6.6.6.6, for=198.51.100.1", "Forwarded", "for=10.0.0.2"), want: "198.51.100.1"},
		{name: "quoted commas and semicolons do not split elements", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for=198.51.100.1;host="a,b;c", for=10.0.0.2;host="x,for=6.6.6.6"`), want: "198.51.100.1"},
		{name: "escaped quotes in other parameters are skipped", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for=198.51.100.1;host="a\",\"b\\", for=10.0.0.2`), want: "198.51.100.1"},
		{name: "an unterminated quote left of the proxy's element is never reached", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for="6.6.6.6, for=198.51.100.1`), want: "198.51.100.1"},
		{name: "for=unknown stops the walk", opts: fwdConf, req: peerRequest(peer, "Forwarded", "for=198.51.100.1, for=unknown"), want: "10.0.0.1"},
		{name: "an obfuscated for= stops the walk at the nearest trusted hop", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for=198.51.100.1, for="_hidden", for=10.0.0.2`), want: "10.0.0.2"},
		{name: "an obfuscated unquoted for= stops the walk", opts: fwdConf, req: peerRequest(peer, "Forwarded", "for=_gazonk"), want: "10.0.0.1"},
		{name: "an element without for= stops the walk", opts: fwdConf, req: peerRequest(peer, "Forwarded", "for=198.51.100.1, proto=https"), want: "10.0.0.1"},
		{name: "a repeated for= stops the walk", opts: fwdConf, req: peerRequest(peer, "Forwarded", "for=198.51.100.1;for=6.6.6.6"), want: "10.0.0.1"},
		{name: "an escaped for= value stops the walk", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for="198.51.100\.1"`), want: "10.0.0.1"},
		{name: "an empty for= stops the walk", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for=""`), want: "10.0.0.1"},
		{name: "whitespace around = stops the walk", opts: fwdConf, req: peerRequest(peer, "Forwarded", "for = 198.51.100.1"), want: "10.0.0.1"},
		{name: "an unterminated quoted for= stops the walk", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for="198.51.100.1`), want: "10.0.0.1"},
		{name: "empty Forwarded elements and pairs are ignored", opts: fwdConf, req: peerRequest(peer, "Forwarded", ", ;for=198.51.100.1;, ,"), want: "198.51.100.1"},
		{name: "X-Forwarded-For is ignored when reading Forwarded", opts: fwdConf, req: peerRequest(peer, "X-Forwarded-For", "6.6.6.6"), want: "10.0.0.1"},
		{name: "a 1 MB Forwarded element leaves the peer as the key", opts: fwdConf, req: peerRequest(peer, "Forwarded", "for=198.51.100.1;host="+strings.Repeat("a", 1<<20)), want: "10.0.0.1"},
		{name: "a 1 MB quoted string leaves the peer as the key", opts: fwdConf, req: peerRequest(peer, "Forwarded", `for=198.51.100.1;host="`+strings.Repeat(`\"`, 1<<19)+`"`), want: "10.0.0.1"},
		{name: "a 1 MB Forwarded header left of the client is never read", opts: fwdConf, req: peerRequest(peer, "Forwarded", strings.Repeat(`"`, 1<<20)+", for=198.51.100.1"), want: "198.51.100.1"},
		{name: "1000 trusted Forwarded elements cut the walk", opts: fwdConf, req: peerRequest(peer, "Forwarded", "for=198.51.100.1"+strings.Repeat(", for=10.0.0.9", 1000)), want: "10.0.0.9"},

		// A single-value header from a trusted proxy.
		{name: "X-Real-IP from a trusted proxy names the client", opts: realIPConf, req: peerRequest(peer, "X-Real-IP", "198.51.100.1"), want: "198.51.100.1"},
		{name: "X-Real-IP with spaces and a port is read", opts: realIPConf, req: peerRequest(peer, "X-Real-IP", " [2001:db8::1]:80 "), want: "2001:db8::/64"},
		{name: "an X-Real-IP naming a trusted address is the key", opts: realIPConf, req: peerRequest(peer, "X-Real-IP", "10.0.0.7"), want: "10.0.0.7"},
		{name: "a missing X-Real-IP leaves the peer as the key", opts: realIPConf, req: peerRequest(peer), want: "10.0.0.1"},
		{name: "a list in X-Real-IP leaves the peer as the key", opts: realIPConf, req: peerRequest(peer, "X-Real-IP", "6.6.6.6, 198.51.100.1"), want: "10.0.0.1"},
		{name: "two X-Real-IP lines leave the peer as the key", opts: realIPConf, req: peerRequest(peer, "X-Real-IP", "6.6.6.6", "X-Real-IP", "198.51.100.1"), want: "10.0.0.1"},
		{name: "garbage X-Real-IP leaves the peer as the key", opts: realIPConf, req: peerRequest(peer, "X-Real-IP", "unknown"), want: "10.0.0.1"},
		{name: "a 1 MB X-Real-IP leaves the peer as the key", opts: realIPConf, req: peerRequest(peer, "X-Real-IP", strings.Repeat("1", 1<<20)), want: "10.0.0.1"},
		{name: "X-Forwarded-For is ignored when reading X-Real-IP", opts: realIPConf, req: peerRequest(peer, "X-Forwarded-For", "6.6.6.6"), want: "10.0.0.1"},
		{name: "the last source option wins", opts: []IPOption{trustTen, FromHeader("CF-Connecting-IP"), FromXForwardedFor()}, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1", "Cf-Connecting-Ip", "6.6.6.6"), want: "198.51.100.1"},

		// Prefixes.
		{name: "IPv4Prefix groups IPv4 clients by network", opts: []IPOption{IPv4Prefix(24)}, req: peerRequest("203.0.113.7:1"), want: "203.0.113.0/24"},
		{name: "IPv4Prefix groups unmapped IPv4 clients by network", opts: []IPOption{IPv4Prefix(24)}, req: peerRequest("[::ffff:203.0.113.7]:1"), want: "203.0.113.0/24"},
		{name: "IPv6Prefix(128) keys IPv6 clients by address", opts: []IPOption{IPv6Prefix(128)}, req: peerRequest("[2001:db8::1%eth0]:1"), want: "2001:db8::1"},
		{name: "IPv6Prefix(48) groups IPv6 clients by /48", opts: []IPOption{IPv6Prefix(48)}, req: peerRequest("[2001:db8:1:2::1]:1"), want: "2001:db8:1::/48"},
		{name: "IPv6Prefix leaves IPv4 clients alone", opts: []IPOption{IPv6Prefix(48)}, req: peerRequest("203.0.113.7:1"), want: "203.0.113.7"},
		{name: "IPv4Prefix applies to forwarded clients", opts: []IPOption{trustTen, IPv4Prefix(16)}, req: peerRequest(peer, "X-Forwarded-For", "198.51.100.1"), want: "198.51.0.0/16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := IP(tt.opts...)
			got, err := fn(tt.req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("IP(%q) = %q, %v; want error %v", tt.req.remote, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("IP(%q) = %q, %v; want %q", tt.req.remote, got, err, tt.want)
			}
		})
	}
}

// interleave returns name, v0, name, v1, ... for peerRequest.
func interleave(name string, values []string) []string {
	out := make([]string, 0, 2*len(values))
	for _, v := range values {
		out = append(out, name, v)
	}
	return out
}

func TestIPSamePrefixSameKey(t *testing.T) {
	fn := IP()
	a, errA := fn(peerRequest("[2001:db8:1:2:aaaa::1]:1"))
	b, errB := fn(peerRequest("[2001:db8:1:2:bbbb::2]:2"))
	c, errC := fn(peerRequest("[2001:db8:1:3::1]:1"))
	if err := errors.Join(errA, errB, errC); err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("IP keys of two addresses in one /64 = %q and %q, want equal", a, b)
	}
	if a == c {
		t.Errorf("IP keys of addresses in different /64s = %q and %q, want different", a, c)
	}
}

func TestNewIPRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  IPOption
	}{
		{"an IPv6 prefix of 0 bits is rejected", IPv6Prefix(0)},
		{"an IPv6 prefix of 129 bits is rejected", IPv6Prefix(129)},
		{"a negative IPv6 prefix is rejected", IPv6Prefix(-1)},
		{"an IPv4 prefix of 0 bits is rejected", IPv4Prefix(0)},
		{"an IPv4 prefix of 33 bits is rejected", IPv4Prefix(33)},
		{"an empty header name is rejected", FromHeader("")},
		{"the zero prefix is rejected", TrustProxies(netip.Prefix{})},
		{"a prefix longer than its address is rejected", TrustProxies(netip.PrefixFrom(netip.MustParseAddr("10.0.0.0"), 33))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, err := NewIP(tt.opt)
			if !errors.Is(err, ErrInvalidOption) || fn != nil {
				t.Fatalf("NewIP(opt) = %p, %v; want nil, %v", fn, err, ErrInvalidOption)
			}
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("IP(opt) did not panic")
				}
			}()
			IP(tt.opt)
		})
	}
}

func TestNewIPAcceptsValidOptions(t *testing.T) {
	opts := []IPOption{nil, IPv6Prefix(1), IPv6Prefix(128), IPv4Prefix(1), IPv4Prefix(32), TrustLoopback(), TrustPrivate(), FromHeader("Fly-Client-IP")}
	for _, opt := range opts {
		if _, err := NewIP(opt); err != nil {
			t.Errorf("NewIP(opt) = %v, want nil error", err)
		}
	}
}

func TestTrustProxyCIDRs(t *testing.T) {
	tests := []struct {
		name    string
		cidrs   []string
		trusted []string // peers that must be trusted
		other   []string // peers that must not be
		wantErr bool
	}{
		{name: "IPv4 and IPv6 CIDRs are parsed", cidrs: []string{"10.0.0.0/8", "2001:db8::/32"}, trusted: []string{"10.1.2.3", "2001:db8:ffff::1"}, other: []string{"11.0.0.1", "2001:db9::1"}},
		{name: "host bits are masked", cidrs: []string{"192.168.1.77/24"}, trusted: []string{"192.168.1.1"}, other: []string{"192.168.2.1"}},
		{name: "bare addresses are single hosts", cidrs: []string{"192.0.2.1", "::1"}, trusted: []string{"192.0.2.1", "::1"}, other: []string{"192.0.2.2", "::2"}},
		{name: "IPv4-mapped prefixes trust IPv4 peers", cidrs: []string{"::ffff:10.0.0.0/104"}, trusted: []string{"10.9.9.9", "::ffff:10.9.9.9"}, other: []string{"11.0.0.1"}},
		{name: "no CIDRs trust nothing", other: []string{"10.0.0.1", "127.0.0.1"}},
		{name: "a prefix length out of range is an error", cidrs: []string{"10.0.0.0/8", "10.0.0.0/33"}, wantErr: true},
		{name: "a word is an error", cidrs: []string{"localhost"}, wantErr: true},
		{name: "an empty string is an error", cidrs: []string{""}, wantErr: true},
		{name: "a zone is an error", cidrs: []string{"fe80::1%eth0"}, wantErr: true},
		{name: "a port is an error", cidrs: []string{"10.0.0.1:80"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt, err := TrustProxyCIDRs(tt.cidrs...)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidOption) {
					t.Fatalf("TrustProxyCIDRs(%q) = %v, want %v", tt.cidrs, err, ErrInvalidOption)
				}
				return
			}
			if err != nil {
				t.Fatalf("TrustProxyCIDRs(%q) = %v", tt.cidrs, err)
			}
			fn := IP(opt)
			for _, p := range tt.trusted {
				if got, _ := fn(peerRequest(p, "X-Forwarded-For", "198.51.100.1")); got != "198.51.100.1" {
					t.Errorf("IP from peer %q = %q, want the forwarded client (peer trusted)", p, got)
				}
			}
			for _, p := range tt.other {
				if got, _ := fn(peerRequest(p, "X-Forwarded-For", "198.51.100.1")); got == "198.51.100.1" {
					t.Errorf("IP from peer %q = %q, want the peer (peer untrusted)", p, got)
				}
			}
		})
	}
}

func TestTrustLoopbackAndPrivate(t *testing.T) {
	tests := []struct {
		name    string
		opt     IPOption
		peer    string
		trusted bool
	}{
		{"TrustLoopback trusts 127.0.0.1", TrustLoopback(), "127.0.0.1:1", true},
		{"TrustLoopback trusts 127.255.0.1", TrustLoopback(), "127.255.0.1:1", true},
		{"TrustLoopback trusts ::1", TrustLoopback(), "[::1]:1", true},
		{"TrustLoopback trusts a mapped 127.0.0.1", TrustLoopback(), "[::ffff:127.0.0.1]:1", true},
		{"TrustLoopback does not trust 10.0.0.1", TrustLoopback(), "10.0.0.1:1", false},
		{"TrustPrivate trusts 10.0.0.1", TrustPrivate(), "10.0.0.1:1", true},
		{"TrustPrivate trusts 172.31.255.255", TrustPrivate(), "172.31.255.255:1", true},
		{"TrustPrivate does not trust 172.32.0.1", TrustPrivate(), "172.32.0.1:1", false},
		{"TrustPrivate trusts 192.168.0.1", TrustPrivate(), "192.168.0.1:1", true},
		{"TrustPrivate trusts fd12::1", TrustPrivate(), "[fd12::1]:1", true},
		{"TrustPrivate does not trust 127.0.0.1", TrustPrivate(), "127.0.0.1:1", false},
		{"TrustPrivate does not trust a public address", TrustPrivate(), "203.0.113.7:1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IP(tt.opt)(peerRequest(tt.peer, "X-Forwarded-For", "198.51.100.1"))
			if err != nil {
				t.Fatal(err)
			}
			if trusted := got == "198.51.100.1"; trusted != tt.trusted {
				t.Errorf("IP(%q) = %q, trusted %v, want %v", tt.peer, got, trusted, tt.trusted)
			}
		})
	}
}

func TestIPOptionsDoNotShareState(t *testing.T) {
	opt := TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))
	a := IP(opt)
	b := IP(opt, TrustProxies(netip.MustParsePrefix("203.0.113.0/24")))
	req := peerRequest("203.0.113.7:1", "X-Forwarded-For", "198.51.100.1")
	if got, _ := a(req); got != "203.0.113.7" {
		t.Errorf("IP(10/8)(%q) = %q, want %q: a later IP call changed an earlier Func", req.remote, got, "203.0.113.7")
	}
	if got, _ := b(req); got != "198.51.100.1" {
		t.Errorf("IP(10/8, 203.0.113/24)(%q) = %q, want %q", req.remote, got, "198.51.100.1")
	}
}

func TestIPAllocations(t *testing.T) {
	tests := []struct {
		name string
		fn   Func
		req  Request
		max  float64
	}{
		{"an untrusted IPv4 peer allocates nothing: its key is part of RemoteAddr", IP(), peerRequest("203.0.113.7:5678"), 0},
		{"an untrusted IPv4 peer without a port allocates nothing", IP(), peerRequest("203.0.113.7"), 0},
		{"an untrusted IPv4 peer with trusted proxies configured allocates nothing", IP(xffConf...), peerRequest("203.0.113.7:5678", "X-Forwarded-For", "198.51.100.1"), 0},
		{"an IPv4 peer keyed by prefix allocates only the key", IP(IPv4Prefix(24)), peerRequest("203.0.113.7:5678"), 1},
		{"an IPv4-mapped IPv6 peer allocates only the key", IP(), peerRequest("[::ffff:203.0.113.7]:5678"), 1},
		{"an untrusted IPv6 peer allocates only the key", IP(), peerRequest("[2001:db8::1]:5678"), 1},
		{"a trusted proxy with X-Forwarded-For allocates only the key", IP(xffConf...), peerRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1, 10.0.0.2"), 1},
		{"a trusted proxy with Forwarded allocates only the key", IP(fwdConf...), peerRequest("10.0.0.1:1", "Forwarded", `for="[2001:db8::1]:80";proto=https, for=10.0.0.2`), 1},
		{"an IPv4 peer from PeerAddr allocates only the key", IP(), peerAddrRequest(netip.MustParseAddrPort("203.0.113.7:5678")), 1},
		{"an IPv6 peer from PeerAddr allocates only the key", IP(), peerAddrRequest(netip.MustParseAddrPort("[2001:db8::1]:5678")), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testing.AllocsPerRun(100, func() {
				if _, err := tt.fn(tt.req); err != nil {
					t.Fatal(err)
				}
			})
			if got > tt.max {
				t.Errorf("AllocsPerRun(IP) = %v, want <= %v", got, tt.max)
			}
		})
	}
}
