package keyfuncs

import (
	"net/netip"
	"strings"
)

// Bounds on the work IP does per request, whatever the size of the headers:
// at most MaxHops elements, each found by scanning at most maxNodeLen+1
// (X-Forwarded-For) or maxElementLen+1 (Forwarded) bytes from the right.
const (
	// maxNodeLen is the longest X-Forwarded-For element or single-address
	// header value, in bytes, that IP considers. The longest address with
	// brackets and port, "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535",
	// has 53 bytes; the rest is room for a zone and whitespace.
	maxNodeLen = 256

	// maxElementLen is the longest Forwarded element, in bytes, that IP
	// considers: room for for=, by=, proto= and a long host=.
	maxElementLen = 1024
)

// splitFunc splits the last list element off a header field line. It
// returns the rest of the line, the address text of the element ("" for an
// empty element), whether the line holds more elements, and ok=false if the
// element is not usable: the walk must stop there.
type splitFunc func(line string) (rest, node string, more, ok bool)

// walk finds the client address in the field lines of a forwarding header,
// read right to left: the first address that is not trusted, or else the
// last address reached (initially the trusted peer) when the lines run out,
// an element is unusable or MaxHops elements have been examined.
func (c *ipConfig) walk(lines []string, peer netip.Addr, split splitFunc) netip.Addr {
	cur := peer
	steps := 0
	for i := len(lines) - 1; i >= 0; i-- {
		line, more := lines[i], true
		for more {
			if steps == MaxHops {
				return cur
			}
			steps++
			var node string
			var ok bool
			line, node, more, ok = split(line)
			if !ok {
				return cur
			}
			if node == "" { // empty list element: ignored, as RFC 9110 asks
				continue
			}
			a, ok := parseNode(node)
			if !ok {
				return cur
			}
			if !c.isTrusted(a) {
				return a
			}
			cur = a
		}
	}
	return cur
}

// lastXFFElement is the splitFunc of X-Forwarded-For: a comma-separated
// list of addresses. It scans at most maxNodeLen+1 bytes.
func lastXFFElement(line string) (rest, node string, more, ok bool) {
	start := max(0, len(line)-maxNodeLen-1)
	i := strings.LastIndexByte(line[start:], ',')
	if i < 0 {
		if len(line) > maxNodeLen {
			return "", "", false, false
		}
		return "", trimOWS(line), false, true
	}
	i += start
	return line[:i], trimOWS(line[i+1:]), true, true
}

// lastForwardedElement is the splitFunc of Forwarded (RFC 7239): a
// comma-separated list of elements of ';'-separated name=value pairs, where
// a value may be a quoted string holding commas. It finds the element's
// start scanning right to left, skipping quoted strings, and scans at most
// maxElementLen+1 bytes; then it parses the element left to right and returns
// the value of its for= parameter.
//
// Reading right to left also keeps the elements appended by trusted proxies
// intact when a client sent an unterminated quoted string before them.
func lastForwardedElement(line string) (rest, node string, more, ok bool) {
	lim := max(0, len(line)-maxElementLen-1) // the comma before the element is at or after lim
	comma := -1
	for i := len(line) - 1; i >= lim; i-- {
		switch line[i] {
		case ',':
			comma = i
		case '"':
			j, ok := openingQuote(line, lim, i)
			if !ok {
				return "", "", false, false
			}
			i = j
			continue
		default:
			continue
		}
		break
	}
	if comma < 0 && len(line) > maxElementLen { // the element is too long
		return "", "", false, false
	}
	if comma >= 0 {
		rest, more = line[:comma], true
	}
	elem := trimOWS(line[comma+1:])
	if elem == "" {
		return rest, "", more, true
	}
	node, ok = forwardedFor(elem)
	return rest, node, more, ok
}

// openingQuote returns the index of the quote that opens the quoted string
// closed by the quote at s[end], looking no further left than lim. Inside a
// quoted string every backslash starts a quoted-pair, so a quote preceded by
// an odd number of backslashes is escaped and one preceded by an even number
// is the opening quote. ok is false if there is none, or if a run of
// backslashes reaches lim, where its parity is unknown.
func openingQuote(s string, lim, end int) (int, bool) {
	for j := end - 1; j >= lim; j-- {
		if s[j] != '"' {
			continue
		}
		n := 0 // backslashes before s[j]
		for j-n-1 >= lim && s[j-n-1] == '\\' {
			n++
		}
		if j-n == lim && lim > 0 {
			return 0, false
		}
		if n%2 == 0 {
			return j, true
		}
		j -= n
	}
	return 0, false
}

// forwardedFor parses one Forwarded element left to right and returns the
// value of its for= parameter, unquoted. ok is false if the element is
// malformed, or has no for= parameter or more than one (RFC 7239 forbids
// repeating a parameter), or if the value is empty or holds a quoted-pair
// (no address needs one).
func forwardedFor(elem string) (value string, ok bool) {
	found := false
	s := elem
	for {
		for s != "" && (isOWS(s[0]) || s[0] == ';') { // empty pairs are allowed
			s = s[1:]
		}
		if s == "" {
			break
		}
		i := 0
		for i < len(s) && isTchar(s[i]) {
			i++
		}
		if i == 0 || i == len(s) || s[i] != '=' {
			return "", false
		}
		name := s[:i]
		s = s[i+1:]
		var v string
		var escaped bool
		if s != "" && s[0] == '"' {
			j := 1
			for ; j < len(s) && s[j] != '"'; j++ {
				switch c := s[j]; {
				case c == '\\':
					escaped = true
					j++ // the escaped byte, checked below
					if j < len(s) && !isQuotedPairByte(s[j]) {
						return "", false
					}
				case !isQdtext(c):
					return "", false
				}
			}
			if j >= len(s) { // unterminated
				return "", false
			}
			v, s = s[1:j], s[j+1:]
		} else {
			j := 0
			for j < len(s) && isTokenValueByte(s[j]) {
				j++
			}
			v, s = s[:j], s[j:]
		}
		if len(name) == 3 && strings.EqualFold(name, "for") {
			if found || escaped || v == "" {
				return "", false
			}
			found, value = true, v
		}
		s = trimOWS(s)
		if s != "" && s[0] != ';' {
			return "", false
		}
	}
	return value, found
}

// isTchar reports whether c is a token character (RFC 9110).
func isTchar(c byte) bool {
	if isAlnum(c) {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// isQdtext reports whether c may appear unescaped in a quoted string.
func isQdtext(c byte) bool {
	return c == '\t' || c == ' ' || c == 0x21 || 0x23 <= c && c <= 0x5b || 0x5d <= c && c <= 0x7e || c >= 0x80
}

// isQuotedPairByte reports whether c may follow a backslash in a quoted string.
func isQuotedPairByte(c byte) bool {
	return c == '\t' || c == ' ' || 0x21 <= c && c <= 0x7e || c >= 0x80
}

// isTokenValueByte reports whether c may appear in an unquoted value. This is
// laxer than RFC 7239, which requires a token: it also accepts the ':', '['
// and ']' of unquoted "for=192.0.2.1:80" or "for=[2001:db8::1]" written by
// some proxies. A backslash, only meaningful inside a quoted string, is
// rejected.
func isTokenValueByte(c byte) bool {
	return c > ' ' && c != 0x7f && c != ';' && c != ',' && c != '"' && c != '\\'
}
