package keyfuncs

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// Seeds shared by the fuzz targets: hostile values of every header.
var (
	fuzzRemotes = []string{
		"10.0.0.1:443", "203.0.113.7:5678", "203.0.113.7", "[2001:db8::1]:80", "[fe80::1%eth0]:80",
		"[::ffff:10.0.0.1]:1", "::ffff:203.0.113.7", "fd00::1", "", "@", "garbage", "[1.2.3.4]:80", "1.2.3.4:99999",
	}
	fuzzXFF = []string{
		"", "198.51.100.1", "6.6.6.6, 198.51.100.1, 10.0.0.2", "198.51.100.1, garbage, 10.0.0.2", "unknown", "_hidden",
		",,, ,", "[2001:db8::1]:4711, ::ffff:10.0.0.2", "fe80::1%eth0", "6.6.6.6\n198.51.100.1, 10.0.0.2",
		"10.0.0.5, 10.0.0.4", strings.Repeat("10.0.0.9,", 40) + "198.51.100.1", "198.51.100.1" + strings.Repeat(",10.0.0.9", 40),
		strings.Repeat(" ", 300) + "198.51.100.1",
	}
	fuzzForwarded = []string{
		"", "for=198.51.100.1", `for="[2001:db8:cafe::17]:4711"`, "for=192.0.2.60;proto=http;by=203.0.113.43",
		"for=6.6.6.6, for=198.51.100.1, for=10.0.0.2", "for=unknown", `for="_hidden"`, "for=_gazonk", "proto=https",
		`for=198.51.100.1;host="a,b;c", for=10.0.0.2;host="x,for=6.6.6.6"`, `for=198.51.100.1;host="a\",\"b\\", for=10.0.0.2`,
		`for="6.6.6.6, for=198.51.100.1`, `for="198.51.100.1:_p1"`, "for=198.51.100.1;for=6.6.6.6", `for="1.2.3\.4"`,
		"for=6.6.6.6\nfor=198.51.100.1, for=10.0.0.2", ", ;for=198.51.100.1;, ,", `a="\\\"", for=10.0.0.2`,
		`for=a"b,c"`, `x=\"", for=198.51.100.1`,
	}
	fuzzSingle = []string{"", "198.51.100.1", " [2001:db8::1]:80 ", "6.6.6.6, 198.51.100.1", "6.6.6.6\n198.51.100.1", "unknown"}
)

// lines splits a fuzzed header into field lines at '\n'; "" is no header.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// trustedTen is the trust predicate of trustTen.
func trustedTen(a netip.Addr) bool {
	return netip.MustParsePrefix("10.0.0.0/8").Contains(a) || netip.MustParsePrefix("fd00::/8").Contains(a)
}

// checkKey fails unless key is the canonical text of an unmapped, unzoned
// address, or of a masked prefix of v4Bits (IPv4) or v6Bits (IPv6).
func checkKey(t *testing.T, key string, v4Bits, v6Bits int) {
	t.Helper()
	var a netip.Addr
	bits := -1
	if strings.Contains(key, "/") {
		p, err := netip.ParsePrefix(key)
		if err != nil || p != p.Masked() || p.String() != key {
			t.Fatalf("key %q is not a canonical masked prefix (%v)", key, err)
		}
		a, bits = p.Addr(), p.Bits()
	} else {
		var err error
		if a, err = netip.ParseAddr(key); err != nil || a.String() != key {
			t.Fatalf("key %q is not a canonical address (%v)", key, err)
		}
		bits = a.BitLen()
	}
	if a.Zone() != "" || a.Is4In6() {
		t.Fatalf("key %q has a zone or is IPv4-mapped", key)
	}
	if want := map[bool]int{true: v4Bits, false: v6Bits}[a.Is4()]; bits != want {
		t.Fatalf("key %q has %d bits, want %d", key, bits, want)
	}
}

func FuzzIP(f *testing.F) {
	for i, r := range fuzzRemotes {
		f.Add(r, fuzzXFF[i%len(fuzzXFF)], fuzzForwarded[i%len(fuzzForwarded)], fuzzSingle[i%len(fuzzSingle)])
	}
	type config struct {
		name           string
		fn             Func
		v4Bits, v6Bits int
	}
	base := IP()
	configs := []config{
		{"X-Forwarded-For", IP(xffConf...), 32, 64},
		{"Forwarded", IP(fwdConf...), 32, 64},
		{"X-Real-IP", IP(realIPConf...), 32, 64},
		{"source without trusted proxies", IP(FromForwarded()), 32, 64},
	}
	unixTen := IP(append([]IPOption{TrustUnixSocket()}, xffConf...)...)
	basePrefixed := IP(IPv4Prefix(20), IPv6Prefix(40))
	prefixed := config{"prefixes", IP(trustTen, IPv4Prefix(20), IPv6Prefix(40)), 20, 40}
	f.Fuzz(func(t *testing.T, remote, xff, fwd, single string) {
		req := &fakeRequest{remote: remote, header: map[string][]string{
			"X-Forwarded-For": lines(xff),
			"Forwarded":       lines(fwd),
			"X-Real-Ip":       lines(single),
		}}
		peer, peerOK := parseNode(remote)
		untrusted := peerOK && !trustedTen(peer)
		// The same peer as a PeerAddrRequest, when remote is one.
		ap, apErr := netip.ParseAddrPort(remote)
		byAddr := addrRequest{fakeRequest: &fakeRequest{header: req.header}, peer: ap, ok: true}
		for i, c := range append(configs, prefixed) {
			want, wantErr := base(req)
			if i == len(configs) {
				want, wantErr = basePrefixed(req)
			}
			got, err := c.fn(req)
			if apErr == nil {
				if k, kerr := c.fn(byAddr); kerr != nil || err != nil || k != got {
					t.Fatalf("%s: IP(PeerAddr %v) = %q, %v; want %q, %v as IP(%q)", c.name, ap, k, kerr, got, err, remote)
				}
			}
			if wantErr != nil {
				if err == nil || errors.Is(wantErr, ErrNoKey) != errors.Is(err, ErrNoKey) || errors.Is(wantErr, ErrBadAddress) != errors.Is(err, ErrBadAddress) {
					t.Fatalf("%s: IP(%q) = %q, %v; want error %v", c.name, remote, got, err, wantErr)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: IP(%q) = %v; want a key (peer-only key %q)", c.name, remote, err, want)
			}
			checkKey(t, got, c.v4Bits, c.v6Bits)
			if (untrusted || c.name == "source without trusted proxies") && got != want {
				t.Fatalf("%s: IP(%q) with an untrusted peer = %q, want the peer's key %q", c.name, remote, got, want)
			}
		}
		// TrustUnixSocket changes nothing for a peer with an address, nor
		// for one off a Unix socket; on one, the key is the client the
		// X-Forwarded-For walk finds from no peer (refXFF), or there is
		// none (ErrBadAddress).
		want, wantErr := configs[0].fn(req) // the same trusted prefixes, without the option
		for _, unix := range []bool{false, true} {
			got, err := unixTen(socketRequest{req, unix})
			switch {
			case peerOK:
				if got != want || (err == nil) != (wantErr == nil) {
					t.Fatalf("TrustUnixSocket (unix %v): IP(%q) = %q, %v; want %q, %v", unix, remote, got, err, want, wantErr)
				}
			case !unix:
				if !errors.Is(err, ErrBadAddress) || got != "" {
					t.Fatalf("TrustUnixSocket (unix %v): IP(%q) = %q, %v; want ErrBadAddress", unix, remote, got, err)
				}
			default:
				client := refXFF(lines(xff), netip.Addr{})
				if !client.IsValid() {
					if !errors.Is(err, ErrBadAddress) {
						t.Fatalf("TrustUnixSocket: IP(%q, X-Forwarded-For %q) = %q, %v; want ErrBadAddress", remote, xff, got, err)
					}
					break
				}
				if want := (&ipConfig{v4Bits: 32, v6Bits: 64}).format(client); err != nil || got != want {
					t.Fatalf("TrustUnixSocket: IP(%q, X-Forwarded-For %q) = %q, %v; want %q", remote, xff, got, err, want)
				}
			}
		}
	})
}

// refXFF is a plain reading of the X-Forwarded-For rule documented on NewIP:
// split the concatenated field lines at every comma and walk right to left.
func refXFF(lines []string, peer netip.Addr) netip.Addr {
	elems := strings.Split(strings.Join(lines, ","), ",")
	cur := peer
	for i, steps := len(elems)-1, 0; i >= 0; i-- {
		if steps == MaxHops {
			return cur
		}
		steps++
		e := elems[i]
		if len(e) > maxNodeLen {
			return cur
		}
		if e = strings.Trim(e, " \t"); e == "" {
			continue
		}
		a, ok := parseNode(e)
		if !ok {
			return cur
		}
		if !trustedTen(a) {
			return a
		}
		cur = a
	}
	return cur
}

func FuzzXForwardedFor(f *testing.F) {
	for _, x := range fuzzXFF {
		f.Add(x, true)
		f.Add(x, false)
	}
	fn := IP(xffConf...)
	c := &ipConfig{v4Bits: 32, v6Bits: 64}
	f.Fuzz(func(t *testing.T, xff string, trustedPeer bool) {
		remote := "203.0.113.7:1"
		if trustedPeer {
			remote = "10.0.0.1:1"
		}
		ls := lines(xff)
		got, err := fn(&fakeRequest{remote: remote, header: map[string][]string{"X-Forwarded-For": ls}})
		if err != nil {
			t.Fatalf("IP(%q, X-Forwarded-For %q) = %v", remote, xff, err)
		}
		checkKey(t, got, 32, 64)
		peer, _ := parseNode(remote)
		want := c.format(peer)
		if trustedPeer {
			want = c.format(refXFF(ls, peer))
		}
		if got != want {
			t.Fatalf("IP(%q, X-Forwarded-For %q) = %q, want %q", remote, xff, got, want)
		}
	})
}

// refForwardedElements splits one Forwarded field line into elements left to
// right, tracking quoted strings. ok is false if a quoted string is not
// terminated.
func refForwardedElements(line string) (elems []string, ok bool) {
	start, quoted := 0, false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			elems = append(elems, line[start:i])
			start = i + 1
		}
	}
	if quoted {
		return nil, false
	}
	return append(elems, line[start:]), true
}

// refForwarded is a plain left-to-right reading of the Forwarded rule
// documented on NewIP. ok is false if a line does not split cleanly, where
// the right-to-left parser may legitimately differ.
func refForwarded(lines []string, peer netip.Addr) (netip.Addr, bool) {
	var elems []string
	for _, l := range lines {
		e, ok := refForwardedElements(l)
		if !ok {
			return netip.Addr{}, false
		}
		elems = append(elems, e...)
	}
	cur := peer
	for i, steps := len(elems)-1, 0; i >= 0; i-- {
		if steps == MaxHops {
			return cur, true
		}
		steps++
		e := elems[i]
		if len(e) > maxElementLen {
			return cur, true
		}
		if e = strings.Trim(e, " \t"); e == "" {
			continue
		}
		v, ok := forwardedFor(e)
		if !ok {
			return cur, true
		}
		a, ok := parseNode(v)
		if !ok {
			return cur, true
		}
		if !trustedTen(a) {
			return a, true
		}
		cur = a
	}
	return cur, true
}

func FuzzForwarded(f *testing.F) {
	for _, x := range fuzzForwarded {
		f.Add(x, true)
		f.Add(x, false)
	}
	fn := IP(fwdConf...)
	c := &ipConfig{v4Bits: 32, v6Bits: 64}
	f.Fuzz(func(t *testing.T, fwd string, trustedPeer bool) {
		remote := "[2001:db8::7]:1"
		if trustedPeer {
			remote = "[fd00::1]:1"
		}
		ls := lines(fwd)
		got, err := fn(&fakeRequest{remote: remote, header: map[string][]string{"Forwarded": ls}})
		if err != nil {
			t.Fatalf("IP(%q, Forwarded %q) = %v", remote, fwd, err)
		}
		checkKey(t, got, 32, 64)
		peer, _ := parseNode(remote)
		if !trustedPeer {
			if want := c.format(peer); got != want {
				t.Fatalf("IP(%q, Forwarded %q) = %q, want %q", remote, fwd, got, want)
			}
			return
		}
		if ref, ok := refForwarded(ls, peer); ok {
			if want := c.format(ref); got != want {
				t.Fatalf("IP(%q, Forwarded %q) = %q, want %q", remote, fwd, got, want)
			}
		}
	})
}

func FuzzParseNode(f *testing.F) {
	for _, s := range fuzzRemotes {
		f.Add(s)
	}
	for _, s := range []string{"192.0.2.1:_obf", "[2001:db8::1]", "[2001:db8::1]:_x", "1.2.3.4:0080", "::ffff:1.2.3.4%z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseNode(s)
		if ok && (!a.IsValid() || a.Zone() != "" || a.Is4In6()) {
			t.Fatalf("parseNode(%q) = %v, want a valid unmapped address without zone", s, a)
		}
		// The text IP keys an IPv4 peer by must be the address's own.
		if a2, text, ok2 := parseNodeText(s); a2 != a || ok2 != ok || (text != "" && (!a.Is4() || text != a.String())) {
			t.Fatalf("parseNodeText(%q) = %v, %q, %v; want %v, %v and its text only for IPv4", s, a2, text, ok2, a, ok)
		}
		want, err := netip.ParseAddrPort(s)
		wantAddr := want.Addr()
		if err != nil {
			wantAddr, err = netip.ParseAddr(s)
		}
		if err == nil {
			if wantAddr = wantAddr.Unmap().WithZone(""); !ok || a != wantAddr {
				t.Fatalf("parseNode(%q) = %v, %v; want %v as netip parses it", s, a, ok, wantAddr)
			}
			return
		}
		if ok && !strings.Contains(s, ":_") && !strings.HasPrefix(s, "[") {
			t.Fatalf("parseNode(%q) = %v, which netip rejects", s, a)
		}
	})
}

func FuzzQuery(f *testing.F) {
	for _, q := range []string{"a=1", "a=1&a=2", "a%zz=1&a=2", "a=1;b=2&a=3", "%61=b+c", "&&a=&a=x"} {
		f.Add(q, "a")
	}
	f.Fuzz(func(t *testing.T, query, name string) {
		if strings.Count(query, "&") > 1000 { // url.ParseQuery caps the number of parameters
			return
		}
		v, _ := url.ParseQuery(query)
		if got, want := queryGet(query, name), v.Get(name); got != want {
			t.Fatalf("queryGet(%q, %q) = %q, want %q", query, name, got, want)
		}
	})
}
