package keyfuncs

import (
	"context"
	"net"
	"net/http"
	"net/netip"
)

// Request is a framework-neutral, read-only view of an incoming HTTP request.
// Each framework adapter implements it over its own request type; FromHTTP
// implements it for *http.Request.
//
// Implementations must be cheap to call (key functions run on every request)
// and must not retain or modify the request. A Request is used by one
// goroutine at a time and only for the duration of the handler. The
// strings its methods return may outlive it, since a key is one of them or
// part of one (IP keys an IPv4 peer by the address part of RemoteAddr): a
// Request over buffers that the framework reuses must return copies.
type Request interface {
	// Method returns the request method, e.g. "GET".
	Method() string

	// Path returns the URL path, decoded, e.g. "/users/42".
	Path() string

	// Route returns the pattern of the route that matched the request,
	// e.g. "/users/:id" or, for the standard ServeMux, "GET /users/{id}".
	// It returns "" when the router does not report one.
	Route() string

	// Header returns the first value of the named header, or "" if the
	// header is absent. The name is matched case-insensitively; callers in
	// this package pass canonical names (see http.CanonicalHeaderKey).
	Header(name string) string

	// HeaderValues returns every field line of the named header, in the
	// order received, or nil if the header is absent. Repeated
	// X-Forwarded-For and Forwarded lines must all be reported, in order,
	// for IP to find the client address. The caller must not modify the
	// returned slice.
	HeaderValues(name string) []string

	// Query returns the first value of the named URL query parameter,
	// decoded, or "" if it is absent.
	Query(name string) string

	// RemoteAddr returns the address of the transport peer: "ip:port",
	// "[ipv6%zone]:port" or a bare IP address; for a peer on a Unix
	// socket, what net/http reports ("@", a socket path, or "" on macOS
	// and the BSDs). A Request that holds the peer as an address rather
	// than as text may also implement PeerAddrRequest, which IP then reads
	// instead of parsing RemoteAddr.
	RemoteAddr() string

	// Context returns the request's context. It is never nil.
	Context() context.Context
}

// A PeerAddrRequest is a Request that also reports its transport peer as
// a netip.AddrPort. IP (and its trusted-proxy check) uses PeerAddr when it
// reports true, instead of RemoteAddr, which it reads only when PeerAddr
// reports false: an adapter whose framework holds the peer as a net.Addr
// saves formatting it as text for IP to parse it back. The key is the
// same either way.
//
// Implement it only over a peer already held as an address (a
// *net.TCPAddr); a Request whose peer is a string, such as FromHTTP's,
// has nothing to gain from it.
type PeerAddrRequest interface {
	Request

	// PeerAddr returns the address RemoteAddr describes, and true; or
	// false when the peer has no IP address (a Unix socket, say) or none
	// is known. The address may be IPv4-mapped and may have a zone: IP
	// unmaps it and drops the zone, as it does with RemoteAddr. It must
	// not allocate.
	PeerAddr() (netip.AddrPort, bool)
}

// A UnixSocketRequest is a Request that knows, from its connection,
// whether it came over a Unix domain socket. IP asks it when the peer is
// no address (see TrustUnixSocket): the text of RemoteAddr cannot say,
// being "@" for an unnamed peer on Linux but "" on macOS and the BSDs, and
// anything at all once a layer in front rewrites RemoteAddr. FromHTTP's
// Request and every adapter of this repository (nethttp, ginlimit,
// echolimit, fiberlimit, grpclimit) implement it; for a Request that does
// not, IP takes a RemoteAddr of "@", "@name" or a path to be a Unix
// socket's peer.
type UnixSocketRequest interface {
	Request

	// UnixSocket reports whether the request came over a Unix domain
	// socket: whether the server's end of its connection is one.
	UnixSocket() bool
}

// OnUnixSocket reports whether r, not nil, came over a Unix domain
// socket: whether the local address net/http keeps in its context
// (http.LocalAddrContextKey) is a *net.UnixAddr. It is UnixSocket for
// FromHTTP's Request, and for the adapters over net/http.
func OnUnixSocket(r *http.Request) bool {
	_, ok := r.Context().Value(http.LocalAddrContextKey).(*net.UnixAddr)
	return ok
}

// Func derives a rate-limiting key from a request: who (or what) is being
// limited. The functions of this package never return an empty key with a
// nil error: they return ErrNoKey (wrapped) when the request carries no key,
// ErrKeyTooLong when the value is longer than MaxKeyLen, and (IP)
// ErrBadAddress when the peer is no usable address.
//
// A Func must be safe for concurrent use; all Funcs of this package are.
type Func func(r Request) (string, error)
