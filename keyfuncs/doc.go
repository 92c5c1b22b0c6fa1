// Package keyfuncs derives rate-limiting keys from HTTP requests: who, or
// what, a request is charged to.
//
// # Model
//
// A key function (Func) reads a framework-neutral view of the request
// (Request) and returns a string key, or an error. Each framework adapter
// implements Request over its own request type; FromHTTP implements it for
// net/http. The same Func therefore works with every adapter:
//
//	keyfuncs.IP()                                       // the client address (the default key)
//	keyfuncs.Header("X-API-Key")                        // a header, verbatim
//	keyfuncs.Query("token")                             // a query parameter
//	keyfuncs.Route()                                    // the matched route pattern
//	keyfuncs.ContextValue(userKey{})                    // set by an auth middleware
//	keyfuncs.Join("|", keyfuncs.IP(), keyfuncs.Route()) // per client and route
//	keyfuncs.Static("global")                           // one bucket for everyone
//
// A Func never returns an empty key with a nil error. A request that
// carries no key gets an error matching ErrNoKey, and a value longer than
// MaxKeyLen bytes one matching ErrKeyTooLong, so a client cannot make the
// store hold huge keys. What to do with such a request (reject it, or fall
// back to another key) is the middleware's decision. Error text is for
// logs, never for the client.
//
// # Client addresses and the security rule
//
// Forwarding headers (X-Forwarded-For, Forwarded, X-Real-IP,
// CF-Connecting-IP, ...) are written by whoever sends the request. A key
// taken from them on trust lets any client pick a fresh key per request and
// escape its limit, or pick a victim's address and exhaust the victim's
// quota. So IP follows one rule:
//
// Forwarding headers are never trusted unless the peer (the address the
// connection comes from) is a configured trusted proxy.
//
// By default IP keys on the peer alone. With TrustProxies (or
// TrustProxyCIDRs, TrustLoopback, TrustPrivate) it reads one chosen header
// when, and only when, the peer is inside a trusted prefix; with
// TrustUnixSocket, when the request came over a Unix socket, whose peer
// has no address (the header must then name the client, or the request
// has no key). List headers
// (X-Forwarded-For, Forwarded) are read right to left, because each proxy
// appends the address it received the request from: the entries on the
// right were written by trusted proxies, those on the left by whoever
// connected first. Trusted addresses are skipped and the first untrusted one
// is the client. The walk stops, falling back to the last trusted address
// reached, at an entry that is not a usable address, so the key is never a
// value the client made up; it examines at most MaxHops entries of bounded
// length, so a megabyte of header costs no more than a short one. See NewIP
// for the exact rules.
//
// IPv6 clients are keyed by their /64 network by default (IPv6Prefix),
// since one host commonly holds a whole /64; IPv4-mapped IPv6 addresses are
// unmapped first, so a client has the same key over IPv4 and IPv6 sockets.
//
// IP reads the peer from Request.RemoteAddr, as text. A Request whose
// framework holds the peer as an address (fiberlimit's, over fasthttp's
// *net.TCPAddr) also implements PeerAddrRequest, and IP reads the
// netip.AddrPort it reports instead, without formatting the address as
// text and parsing it back; the keys, and the trusted-proxy checks, are
// the same either way.
//
// # Concurrency
//
// Every Func returned by this package is immutable and safe for concurrent
// use. A Request is used by one goroutine for the duration of a request.
package keyfuncs
