package keyfuncs

import (
	"fmt"
	"net/http"
	"net/netip"
)

// MaxHops is the most list elements (X-Forwarded-For addresses or Forwarded
// elements, empty ones included) that IP examines in one request, walking
// from the right. A longer chain of trusted proxies is cut there; see IP.
const MaxHops = 32

// source is where IP reads the client address once the peer is trusted.
type source uint8

const (
	sourceXFF source = iota
	sourceForwarded
	sourceHeader
)

// Header names, canonical.
const (
	headerXFF       = "X-Forwarded-For"
	headerForwarded = "Forwarded"
)

// ipConfig is the configuration of one IP Func. It is immutable once built.
type ipConfig struct {
	trusted []netip.Prefix
	unix    bool // a Unix socket's peer is a trusted proxy (TrustUnixSocket)
	source  source
	header  string // canonical; for sourceHeader
	v4Bits  int
	v6Bits  int
}

// IPOption configures IP and NewIP.
type IPOption func(*ipConfig) error

// TrustProxies adds prefixes to the trusted proxies: forwarding headers are
// read only when the peer address is inside one of them, and X-Forwarded-For
// and Forwarded hops inside them are skipped. Prefixes are masked, and
// IPv4-mapped IPv6 prefixes (::ffff:10.0.0.0/104) are unmapped (10.0.0.0/8).
// An IPv4 prefix never contains an IPv6 address and vice versa: trusting
// everything takes both 0.0.0.0/0 and ::/0, and is almost always a mistake.
// An invalid prefix (the zero netip.Prefix) makes NewIP fail.
// Default: no trusted proxies, so forwarding headers are ignored.
func TrustProxies(prefixes ...netip.Prefix) IPOption {
	prefixes = append([]netip.Prefix(nil), prefixes...)
	return func(c *ipConfig) error {
		for _, p := range prefixes {
			if !p.IsValid() {
				return fmt.Errorf("%w: TrustProxies: invalid prefix %v", ErrInvalidOption, p)
			}
			c.trusted = append(c.trusted, normalizePrefix(p))
		}
		return nil
	}
}

// TrustProxyCIDRs parses cidrs, such as "10.0.0.0/8" or "2001:db8::/32", and
// returns the TrustProxies option for them. A bare address ("192.0.2.7" or
// "::1") is taken as a single-address prefix. It returns an error matching
// ErrInvalidOption for the first entry that does not parse; it never panics,
// so cidrs may come from configuration.
func TrustProxyCIDRs(cidrs ...string) (IPOption, error) {
	prefixes := make([]netip.Prefix, 0, len(cidrs))
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%w: trusted proxy %q: %v", ErrInvalidOption, s, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		prefixes = append(prefixes, p)
	}
	return TrustProxies(prefixes...), nil
}

// TrustLoopback trusts proxies on the loopback addresses 127.0.0.0/8 and
// ::1/128, e.g. a reverse proxy on the same host.
func TrustLoopback() IPOption {
	return TrustProxies(
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("::1/128"),
	)
}

// TrustPrivate trusts proxies on private networks: 10.0.0.0/8,
// 172.16.0.0/12, 192.168.0.0/16 (RFC 1918) and fc00::/7 (RFC 4193), e.g. a
// load balancer inside the same VPC. Only use it when no client can reach
// the service from those networks other than through the proxies.
func TrustPrivate() IPOption {
	return TrustProxies(
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("fc00::/7"),
	)
}

// TrustUnixSocket trusts a peer on a Unix domain socket as a proxy: a
// reverse proxy on the same host (nginx, HAProxy, Envoy) that forwards to
// the service over a socket file. net/http reports such a peer as the
// RemoteAddr "@" on Linux and "" on macOS and the BSDs (or the socket path
// the peer bound, if any), which is no address: without this option IP
// returns an error matching ErrBadAddress
// for every request from it, as nothing tells one client from another.
// With it, the client address is read from the forwarding header
// (FromXForwardedFor, FromForwarded or FromHeader) as for any trusted
// peer, walking past the addresses of trusted proxies; a request whose
// header names no usable address gets an error matching ErrBadAddress: the
// proxy, not the client, failed to say who the client is. Whether a
// request came over a Unix socket is asked of its connection, the server's
// end of it (see UnixSocketRequest), not read from RemoteAddr: a layer
// that rewrites RemoteAddr alone cannot make a TCP client look like one.
// (A PROXY-protocol listener sets the connection's local address from
// the header it reads: accept that header only from senders you trust, as
// for any address it carries.)
//
// Use it only when every process that can connect to the socket is a
// proxy you run, and that proxy writes the client's address into the
// header: nginx's proxy_pass sets no X-Forwarded-For by default, and a
// client's own would then reach the service as its key. With
// "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;" nginx
// appends the address it received the request from, which IP, reading
// right to left, takes; or set "proxy_set_header X-Real-IP $remote_addr;"
// and read it with FromHeader("X-Real-IP"). nginx never sets Forwarded.
//
// A request made in a test (httptest.NewRequest) is on no socket: put a
// *net.UnixAddr in its context under http.LocalAddrContextKey, as
// net/http does for a request it serves over one.
func TrustUnixSocket() IPOption {
	return func(c *ipConfig) error {
		c.unix = true
		return nil
	}
}

// FromXForwardedFor makes IP read the client address from X-Forwarded-For
// when the peer is a trusted proxy. This is the default.
func FromXForwardedFor() IPOption {
	return func(c *ipConfig) error {
		c.source, c.header = sourceXFF, headerXFF
		return nil
	}
}

// FromForwarded makes IP read the client address from the for= parameters
// of the RFC 7239 Forwarded header when the peer is a trusted proxy.
// Default: X-Forwarded-For.
func FromForwarded() IPOption {
	return func(c *ipConfig) error {
		c.source, c.header = sourceForwarded, headerForwarded
		return nil
	}
}

// FromHeader makes IP read the client address from the named single-value
// header, such as CF-Connecting-IP, True-Client-IP, X-Real-IP or
// Fly-Client-IP, when the peer is a trusted proxy. The proxy must set that
// header itself, replacing any value sent by the client. The name is
// matched case-insensitively; an empty name makes NewIP fail.
// Default: X-Forwarded-For.
func FromHeader(name string) IPOption {
	return func(c *ipConfig) error {
		if name == "" {
			return fmt.Errorf("%w: FromHeader: empty header name", ErrInvalidOption)
		}
		c.source, c.header = sourceHeader, http.CanonicalHeaderKey(name)
		return nil
	}
}

// IPv4Prefix makes IP key IPv4 clients by their /bits network instead of
// their address, 0 < bits <= 32; e.g. IPv4Prefix(24) gives every client of
// 192.0.2.0/24 the key "192.0.2.0/24". Other values make NewIP fail.
// Default: 32, one key per address.
func IPv4Prefix(bits int) IPOption {
	return func(c *ipConfig) error {
		if bits <= 0 || bits > 32 {
			return fmt.Errorf("%w: IPv4Prefix(%d): want 0 < bits <= 32", ErrInvalidOption, bits)
		}
		c.v4Bits = bits
		return nil
	}
}

// IPv6Prefix makes IP key IPv6 clients by their /bits network, with
// 0 < bits <= 128; e.g. the default gives every client of 2001:db8:1:2::/64
// the key "2001:db8:1:2::/64". A single IPv6 host usually holds a whole
// /64, so keying by address would let it rotate through 2^64 keys. Other
// values make NewIP fail. Default: 64.
func IPv6Prefix(bits int) IPOption {
	return func(c *ipConfig) error {
		if bits <= 0 || bits > 128 {
			return fmt.Errorf("%w: IPv6Prefix(%d): want 0 < bits <= 128", ErrInvalidOption, bits)
		}
		c.v6Bits = bits
		return nil
	}
}

// IP returns a Func whose key is the address of the client, for rate
// limiting by client. It is NewIP for options known to be valid: IP panics
// if NewIP would return an error, which for literal options is a programmer
// error. Use NewIP when option values come from configuration.
func IP(opts ...IPOption) Func {
	fn, err := NewIP(opts...)
	if err != nil {
		panic(err)
	}
	return fn
}

// NewIP returns a Func whose key is the address of the client, or an error
// matching ErrInvalidOption if an option is invalid. Nil options are ignored.
//
// By default the key is derived from the transport peer (Request.RemoteAddr,
// or PeerAddr when the Request is a PeerAddrRequest) alone, and forwarding
// headers are ignored: any client can write them.
// They are read only when the peer is inside a prefix given by TrustProxies
// (or TrustProxyCIDRs, TrustLoopback, TrustPrivate), or is on a Unix
// socket trusted by TrustUnixSocket, from the header chosen
// by FromXForwardedFor (the default), FromForwarded or FromHeader; the last
// of those options wins.
//
// X-Forwarded-For (all field lines, in order, comma-separated) and the for=
// parameters of Forwarded are walked right to left, starting from the peer,
// because each proxy appends the address it received the request from: the
// rightmost entries are the ones written by the proxies that are trusted.
// Addresses inside a trusted prefix are skipped, and the first address that
// is not trusted is the client. If the walk ends before finding one, the key
// is the last address it reached, which is a trusted proxy (possibly the
// peer itself); behind a trusted Unix socket, which has no address, the
// request then has no key (ErrBadAddress). The walk ends at the left end of the header; at an entry
// that is not a usable address (garbage, "unknown", an obfuscated
// identifier such as "_hidden", a malformed Forwarded element or one without
// exactly one for= parameter, an X-Forwarded-For entry longer than 256
// bytes or a Forwarded element longer than 1024); or after MaxHops entries,
// empty ones included. Empty list elements are otherwise ignored. So the
// key is never a value the client made up, and a hostile header of any size
// costs at most MaxHops short entries of work. A single-value header
// (FromHeader) is used only if it occurs exactly once and holds one address
// (256 bytes at most); otherwise the key is derived from the peer.
//
// Addresses are normalised before they are compared or keyed: ports and
// IPv6 zones are dropped and IPv4-mapped IPv6 addresses are unmapped
// (::ffff:192.0.2.1 is 192.0.2.1). The key is then the address masked to
// IPv4Prefix bits (default 32) or IPv6Prefix bits (default 64), in
// canonical text: the address alone when the prefix is the whole address
// ("192.0.2.1", "2001:db8::1" with IPv6Prefix(128)), else the prefix in
// CIDR notation ("2001:db8:1:2::/64", "192.0.2.0/24"). Two addresses in the
// same prefix get the same key.
//
// The Func returns an error matching ErrBadAddress if RemoteAddr is empty
// or not an address (when it reads RemoteAddr: see PeerAddrRequest), but
// for a request on a Unix socket that TrustUnixSocket trusts, whose key
// its forwarding header gives; it never panics. On the common path
// (an IPv4 peer, keyed by address) it allocates nothing when it reads
// RemoteAddr, whose address part is the key, and one string, the key, when
// it reads PeerAddr.
// It is safe for concurrent use.
func NewIP(opts ...IPOption) (Func, error) {
	c := &ipConfig{source: sourceXFF, header: headerXFF, v4Bits: 32, v6Bits: 64}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(c); err != nil {
			return nil, err
		}
	}
	return c.key, nil
}

var (
	errNoRemoteAddr = fmt.Errorf("%w: empty remote address", ErrBadAddress)
	errUnixPeer     = fmt.Errorf("%w: the peer is on a Unix socket (see TrustUnixSocket)", ErrBadAddress)
	errUnixNoClient = fmt.Errorf("%w: the peer is on a Unix socket, and its forwarding header names no client", ErrBadAddress)
)

// key is the IP Func.
func (c *ipConfig) key(r Request) (string, error) {
	peer, text, err := peerOf(r)
	if err != nil {
		if unixPeer(r) {
			if c.unix {
				return c.unixClient(r)
			}
			return "", errUnixPeer
		}
		return "", err
	}
	client := peer
	if len(c.trusted) > 0 && c.isTrusted(peer) {
		client = c.client(r, peer)
	}
	if text != "" && client == peer && c.v4Bits == 32 {
		return text, nil // an IPv4 peer's key is in RemoteAddr already
	}
	return c.format(client), nil
}

// peerOf returns the transport peer of r, unmapped and without a zone:
// from PeerAddr when r is a PeerAddrRequest that knows it, else parsed
// from RemoteAddr. text is, when RemoteAddr holds an IPv4 address in IPv4
// form, that address as text (see parseNodeText), "" otherwise.
func peerOf(r Request) (peer netip.Addr, text string, err error) {
	if pr, ok := r.(PeerAddrRequest); ok {
		if ap, ok := pr.PeerAddr(); ok && ap.Addr().IsValid() {
			return ap.Addr().Unmap().WithZone(""), "", nil
		}
	}
	ra := r.RemoteAddr()
	if ra == "" {
		return netip.Addr{}, "", errNoRemoteAddr
	}
	peer, text, ok := parseNodeText(ra)
	if !ok {
		return netip.Addr{}, "", fmt.Errorf("%w: %.64q", ErrBadAddress, ra)
	}
	return peer, text, nil
}

// unixPeer reports whether r, whose peer is no address, came over a Unix
// socket: as r says when it is a UnixSocketRequest, else by the form of
// RemoteAddr ("@" for a peer that bound no name on Linux, its abstract
// name "@name", or its socket file's path).
func unixPeer(r Request) bool {
	if u, ok := r.(UnixSocketRequest); ok {
		return u.UnixSocket()
	}
	ra := r.RemoteAddr()
	return ra != "" && (ra[0] == '@' || ra[0] == '/')
}

// unixClient returns the key of the client that a request from a trusted
// Unix socket's peer comes from, read from the forwarding header.
func (c *ipConfig) unixClient(r Request) (string, error) {
	client := c.client(r, netip.Addr{})
	if !client.IsValid() {
		return "", errUnixNoClient
	}
	return c.format(client), nil
}

// client returns the client address behind the trusted peer.
func (c *ipConfig) client(r Request, peer netip.Addr) netip.Addr {
	lines := r.HeaderValues(c.header)
	switch c.source {
	case sourceForwarded:
		return c.walk(lines, peer, lastForwardedElement)
	case sourceHeader:
		if len(lines) != 1 || len(lines[0]) > maxNodeLen {
			return peer
		}
		if a, ok := parseNode(trimOWS(lines[0])); ok {
			return a
		}
		return peer
	default:
		return c.walk(lines, peer, lastXFFElement)
	}
}

func (c *ipConfig) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// format returns the key of a: a masked to the configured prefix, as text.
// a is valid, unmapped and has no zone.
func (c *ipConfig) format(a netip.Addr) string {
	bits := c.v6Bits
	if a.Is4() {
		bits = c.v4Bits
	}
	if bits == a.BitLen() {
		return a.String()
	}
	p, err := a.Prefix(bits)
	if err != nil { // unreachable: bits is validated and a has no zone
		return a.String()
	}
	var buf [64]byte
	return string(p.AppendTo(buf[:0]))
}

// normalizePrefix masks p and unmaps an IPv4-mapped IPv6 prefix of at least
// 96 bits, so that it matches the unmapped addresses IP compares with it.
func normalizePrefix(p netip.Prefix) netip.Prefix {
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() && bits >= 96 {
		p = netip.PrefixFrom(a.Unmap(), bits-96)
	}
	return p.Masked()
}
