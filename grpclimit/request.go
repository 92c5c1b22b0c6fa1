package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/tollgate/tollgate/keyfuncs"
)

// request is the keyfuncs.Request of one RPC: its context (the server's,
// with the incoming metadata and the peer) and its full method name. The
// key, cost and skip functions of package keyfuncs and guard read it:
//
//	Method        "POST", as every gRPC request is sent
//	Path, Route   the full method, "/package.Service/Method"
//	Header        the first value of the incoming metadata key, the name
//	              matched case-insensitively ("X-Api-Key" reads x-api-key)
//	HeaderValues  every value of that key, in order
//	Query         "": an RPC has no query
//	RemoteAddr    the peer's address (grpc/peer), e.g. "192.0.2.1:50312"
//	PeerAddr      the same as a netip.AddrPort, for a TCP peer
//	              (keyfuncs.PeerAddrRequest, which keyfuncs.IP reads)
//	UnixSocket    whether the server's end of the connection is a Unix
//	              socket (keyfuncs.UnixSocketRequest)
//	Context       the RPC's context
type request struct {
	ctx    context.Context
	method string
}

var (
	_ keyfuncs.PeerAddrRequest   = (*request)(nil)
	_ keyfuncs.UnixSocketRequest = (*request)(nil)
)

// Method implements keyfuncs.Request: gRPC sends every call as an HTTP/2
// POST.
func (x *request) Method() string { return "POST" }

// Path implements keyfuncs.Request with the full method.
func (x *request) Path() string { return x.method }

// Route implements keyfuncs.Request with the full method: known before
// the handler runs, and one key per method.
func (x *request) Route() string { return x.method }

// Header implements keyfuncs.Request with the incoming metadata.
func (x *request) Header(name string) string {
	v := metadata.ValueFromIncomingContext(x.ctx, lower(name))
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// HeaderValues implements keyfuncs.Request with the incoming metadata.
func (x *request) HeaderValues(name string) []string {
	return metadata.ValueFromIncomingContext(x.ctx, lower(name))
}

// Query implements keyfuncs.Request: an RPC has no query.
func (x *request) Query(string) string { return "" }

// RemoteAddr implements keyfuncs.Request with the address of the
// transport peer, or "" when the context has none. Over a Unix socket or
// an in-memory listener (bufconn) it is not an IP address, and
// keyfuncs.IP fails the RPC, unless keyfuncs.TrustUnixSocket trusts a Unix
// socket's peer: key other such servers on something else.
func (x *request) RemoteAddr() string {
	p, ok := peer.FromContext(x.ctx)
	if !ok || p == nil || p.Addr == nil {
		return ""
	}
	return p.Addr.String()
}

// PeerAddr implements keyfuncs.PeerAddrRequest: the transport peer's
// address when it is a *net.TCPAddr, which keyfuncs.IP then reads without
// RemoteAddr formatting it and IP parsing it back; false for any other
// peer, whose RemoteAddr IP reads instead.
func (x *request) PeerAddr() (netip.AddrPort, bool) {
	p, ok := peer.FromContext(x.ctx)
	if !ok || p == nil {
		return netip.AddrPort{}, false
	}
	a, ok := p.Addr.(*net.TCPAddr)
	if !ok || a == nil {
		return netip.AddrPort{}, false
	}
	return a.AddrPort(), true
}

// UnixSocket implements keyfuncs.UnixSocketRequest: whether the RPC came
// over a Unix socket, by the server's end of its connection (the peer's
// LocalAddr, which grpc sets; never the client's address, which an
// interceptor or a PROXY-protocol listener may rewrite). See
// keyfuncs.TrustUnixSocket.
func (x *request) UnixSocket() bool {
	p, ok := peer.FromContext(x.ctx)
	if !ok || p == nil {
		return false
	}
	_, ok = p.LocalAddr.(*net.UnixAddr)
	return ok
}

// Context implements keyfuncs.Request.
func (x *request) Context() context.Context { return x.ctx }

// lower returns the metadata key of the header name: metadata keys are
// lower case. The names keyfuncs.IP reads are spelled out, so that the
// common lookups allocate nothing.
func lower(name string) string {
	switch name {
	case "X-Forwarded-For":
		return "x-forwarded-for"
	case "Forwarded":
		return "forwarded"
	case "X-Real-Ip":
		return "x-real-ip"
	}
	return strings.ToLower(name)
}

// FullMethod returns the full method name of the RPC behind r, a request
// that the interceptors of this package hand to key, cost and skip
// functions, handlers and hooks, and whether r is one: it lets a function
// written against keyfuncs or guard reach gRPC (r.Context() is the RPC's
// context):
//
//	guard.WithOnDenied(func(r keyfuncs.Request, d *guard.Denial) {
//		m, _ := grpclimit.FullMethod(r)
//		log.Printf("denied %s on %s", d.Key, m)
//	})
func FullMethod(r keyfuncs.Request) (string, bool) {
	if x, ok := r.(*request); ok {
		return x.method, true
	}
	return "", false
}

// errNotGRPC is returned by the functions of KeyFunc when called with a
// request that does not come from this package.
var errNotGRPC = errors.New("grpclimit: KeyFunc called with a request not from grpclimit")

// KeyFunc adapts a key function over the RPC's context and full method to
// a keyfuncs.Func, for WithRule, guard.Optional and keyfuncs.Join
// (WithKeyFunc takes such a function as is):
//
//	grpclimit.WithRule(userLim, guard.Optional(grpclimit.KeyFunc(
//		func(ctx context.Context, fullMethod string) (string, error) {
//			return userFrom(ctx), nil // set by your auth interceptor
//		})))
//
// The result follows the keyfuncs.Func contract: an empty key becomes an
// error matching keyfuncs.ErrNoKey (so that guard.Optional exempts the RPC
// from a rule instead of failing it), and a key longer than
// keyfuncs.MaxKeyLen one matching keyfuncs.ErrKeyTooLong. Either fails the
// RPC with InvalidArgument unless the rule is optional. KeyFunc(nil) is
// nil, which WithKey and WithRule reject.
func KeyFunc(fn func(ctx context.Context, fullMethod string) (string, error)) keyfuncs.Func {
	if fn == nil {
		return nil
	}
	return func(r keyfuncs.Request) (string, error) {
		x, ok := r.(*request)
		if !ok {
			return "", errNotGRPC
		}
		k, err := fn(x.ctx, x.method)
		switch {
		case err != nil:
			return "", err
		case k == "":
			return "", errEmptyKey
		case len(k) > keyfuncs.MaxKeyLen:
			return "", errLongKey
		}
		return k, nil
	}
}

var (
	errEmptyKey = fmt.Errorf("grpclimit: %w: the key function returned an empty key", keyfuncs.ErrNoKey)
	errLongKey  = fmt.Errorf("grpclimit: %w: the key function returned more than %d bytes", keyfuncs.ErrKeyTooLong, keyfuncs.MaxKeyLen)
)
