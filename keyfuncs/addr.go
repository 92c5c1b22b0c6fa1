package keyfuncs

import (
	"net/netip"
	"strings"
)

// parseNode parses one network address as it appears in RemoteAddr, in an
// X-Forwarded-For element, in the for= parameter of a Forwarded element
// (unquoted) or in a single-address header. Accepted forms:
//
//	1.2.3.4            1.2.3.4:80          1.2.3.4:_obf
//	2001:db8::1        fe80::1%eth0
//	[2001:db8::1]      [2001:db8::1]:80    [fe80::1%eth0]:_obf
//
// A port is a decimal number not above 65535 (leading zeros allowed, as in
// netip.ParseAddrPort), or an RFC 7239
// obfuscated port ("_" followed by letters, digits, '.', '_' or '-'); it is
// discarded. Brackets only enclose IPv6 addresses. The returned address has
// no zone and is unmapped: ::ffff:1.2.3.4 becomes 1.2.3.4. Anything else,
// including "unknown" and obfuscated identifiers such as "_hidden", is
// rejected. parseNode allocates nothing when it succeeds.
func parseNode(s string) (netip.Addr, bool) {
	a, _, ok := parseNodeText(s)
	return a, ok
}

// parseNodeText is parseNode that also returns, when s holds an IPv4
// address in IPv4 form, the text of that address: s without its port.
// netip parses IPv4 only in canonical form (four decimal fields, no
// leading zeros), so that text is a.String(), and IP can use it as a key
// without formatting (and allocating) it again. It is "" otherwise.
func parseNodeText(s string) (a netip.Addr, v4 string, ok bool) {
	if s == "" {
		return netip.Addr{}, "", false
	}
	if a, host, ok := parseIPv4Port(s); ok {
		return a, host, true
	}
	return parseNodeGeneral(s)
}

// parseNodeGeneral is parseNodeText for every form; s is not empty.
func parseNodeGeneral(s string) (a netip.Addr, v4 string, ok bool) {
	var host string
	var v6 bool
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, "", false
		}
		host, v6 = s[1:end], true
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !validPort(rest[1:])) {
			return netip.Addr{}, "", false
		}
	} else {
		switch strings.Count(s, ":") {
		case 0: // IPv4
			host = s
		case 1: // IPv4:port
			i := strings.IndexByte(s, ':')
			if !validPort(s[i+1:]) {
				return netip.Addr{}, "", false
			}
			host = s[:i]
		default: // bare IPv6, possibly with a zone
			host, v6 = s, true
		}
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Is6() != v6 {
		return netip.Addr{}, "", false
	}
	if !v6 {
		return a, host, true
	}
	return a.Unmap().WithZone(""), "", true
}

// parseIPv4Port parses s when it is an IPv4 address in canonical form
// (four decimal fields of at most 255, no leading zeros: the only form
// netip.ParseAddr accepts) with or without a decimal port, as RemoteAddr
// holds a TCP peer: it returns the address and its text. It reports false
// for every other s, which parseNodeText then parses in full, so it
// accepts nothing parseNodeText would reject. It is parseNodeText's common
// case in one pass, without netip's general parser.
func parseIPv4Port(s string) (a netip.Addr, host string, ok bool) {
	// One byte at a time, each digit checked once: this runs on every
	// request keyed by IP.
	var ip [4]byte
	i := 0
	for field := range ip {
		if field > 0 {
			if i == len(s) || s[i] != '.' {
				return netip.Addr{}, "", false
			}
			i++
		}
		if i == len(s) {
			return netip.Addr{}, "", false
		}
		v := uint(s[i] - '0')
		if v > 9 {
			return netip.Addr{}, "", false
		}
		i++
		if v != 0 { // a field that starts with 0 is 0: "01" is not canonical
			for end := min(i+2, len(s)); i < end; i++ {
				d := uint(s[i] - '0')
				if d > 9 {
					break
				}
				v = v*10 + d
			}
			if v > 255 {
				return netip.Addr{}, "", false
			}
		}
		ip[field] = byte(v)
	}
	// A digit here is a fourth digit, or a digit after a leading 0: both
	// are not canonical, and neither is a port.
	if i < len(s) && (s[i] != ':' || !decimalPort(s[i+1:])) {
		return netip.Addr{}, "", false
	}
	return netip.AddrFrom4(ip), s[:i], true
}

// decimalPort reports whether p is a decimal port: at most 65535, leading
// zeros allowed.
func decimalPort(p string) bool {
	if p == "" {
		return false
	}
	n := uint(0)
	for i := 0; i < len(p); i++ {
		d := uint(p[i] - '0')
		if d > 9 {
			return false
		}
		if n = n*10 + d; n > 65535 {
			return false
		}
	}
	return true
}

// validPort reports whether p is a decimal port (at most 65535) or an
// RFC 7239 obfuscated port.
func validPort(p string) bool {
	if p == "" {
		return false
	}
	if p[0] == '_' {
		if len(p) == 1 {
			return false
		}
		for i := 1; i < len(p); i++ {
			c := p[i]
			if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				return false
			}
		}
		return true
	}
	return decimalPort(p)
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// isOWS reports whether c is optional whitespace (RFC 9110: SP or HTAB).
func isOWS(c byte) bool { return c == ' ' || c == '\t' }

// trimOWS removes leading and trailing optional whitespace.
func trimOWS(s string) string {
	for s != "" && isOWS(s[0]) {
		s = s[1:]
	}
	for s != "" && isOWS(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}
