package fiberlimit

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// view is the keyfuncs.Request of one request. It is pointer shaped, so
// converting it to the interface allocates nothing, and it lets the
// options of this package reach the *fiber.Ctx again.
//
// The strings a *fiber.Ctx returns point into fasthttp's request buffer,
// which is reused for the next request on the connection once the handler
// returns. A key may outlive the handler (in a store's batch, a Denial
// kept by a hook, a goroutine), so every string view returns is a copy or
// a constant: nothing it hands out aliases the request.
type view struct{ c *fiber.Ctx }

var _ keyfuncs.UnixSocketRequest = view{}

var (
	_ keyfuncs.PeerAddrRequest = view{}
	_ guard.RoutePatterner     = view{}
)

// Method implements keyfuncs.Request. Standard methods are returned as
// constants, so that the common case does not allocate.
func (v view) Method() string {
	switch m := v.c.Method(); m {
	case fiber.MethodGet:
		return fiber.MethodGet
	case fiber.MethodHead:
		return fiber.MethodHead
	case fiber.MethodPost:
		return fiber.MethodPost
	case fiber.MethodPut:
		return fiber.MethodPut
	case fiber.MethodPatch:
		return fiber.MethodPatch
	case fiber.MethodDelete:
		return fiber.MethodDelete
	case fiber.MethodOptions:
		return fiber.MethodOptions
	case fiber.MethodConnect:
		return fiber.MethodConnect
	case fiber.MethodTrace:
		return fiber.MethodTrace
	default:
		return strings.Clone(m)
	}
}

// Path implements keyfuncs.Request: the decoded, normalized path of the
// request URI (fasthttp's URI().Path()), copied.
func (v view) Path() string { return string(v.c.Request().URI().Path()) }

// Route implements keyfuncs.Request: c.Route().Path, the pattern of the
// route the middleware is mounted on, with its group's prefix, e.g.
// "/v1/users/:id". Middleware added with app.Use or to a group runs on the
// route of that call, whose Path is its prefix ("/", "/api"): fiber picks
// the route that will answer only as the chain goes on. It is "" outside
// routing, where fiber's c.Route() would report the client's path.
func (v view) Route() string {
	rt := v.c.Route()
	if len(rt.Handlers) == 0 { // fiber's fallback route: its Path is the request's
		return ""
	}
	return rt.Path // owned by the app, not the request
}

// RoutePattern implements guard.RoutePatterner: c.Route().Path for a
// handler of the route that answers, e.g. "/v1/users/:id"; "" for
// middleware added with app.Use or to a group, which runs before fiber
// picks that route.
func (v view) RoutePattern() string {
	rt := v.c.Route()
	if len(rt.Handlers) == 0 || rt.Method == "USE" { // fiber's fallback route, or app.Use's
		return ""
	}
	return rt.Path
}

// Header implements keyfuncs.Request.
func (v view) Header(name string) string { return strings.Clone(v.c.Get(name)) }

// HeaderValues implements keyfuncs.Request.
func (v view) HeaderValues(name string) []string {
	all := v.c.Request().Header.PeekAll(name)
	if len(all) == 0 {
		return nil
	}
	vals := make([]string, len(all))
	for i, b := range all {
		vals[i] = string(b)
	}
	return vals
}

// Query implements keyfuncs.Request, with fasthttp's decoding of the query
// string ('+' is a space; an invalid escape is kept verbatim).
func (v view) Query(name string) string { return strings.Clone(v.c.Query(name)) }

// RemoteAddr implements keyfuncs.Request: the address of the transport
// peer, from the connection, never from a header; formatted as
// net.TCPAddr.String does (IPv4-mapped addresses in IPv4 form), in one
// allocation instead of three.
func (v view) RemoteAddr() string {
	switch a := v.c.Context().RemoteAddr().(type) {
	case *net.TCPAddr:
		if a == nil {
			return ""
		}
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	case nil:
		return ""
	default:
		return a.String()
	}
}

// PeerAddr implements keyfuncs.PeerAddrRequest: the address RemoteAddr
// formats, IPv4-mapped addresses unmapped, without formatting it; false
// when the peer is not a *net.TCPAddr.
func (v view) PeerAddr() (netip.AddrPort, bool) {
	a, ok := v.c.Context().RemoteAddr().(*net.TCPAddr)
	if !ok || a == nil {
		return netip.AddrPort{}, false
	}
	ap := a.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

// UnixSocket implements keyfuncs.UnixSocketRequest: whether the server's
// end of the connection is a Unix socket (see keyfuncs.TrustUnixSocket).
func (v view) UnixSocket() bool {
	_, ok := v.c.Context().LocalAddr().(*net.UnixAddr)
	return ok
}

// Context implements keyfuncs.Request: c.UserContext().
func (v view) Context() context.Context { return v.c.UserContext() }

// writer is the guard.ChainWriter of one request: c's response and the
// request's chain. It is a pair of pointers, passed by pointer.
type writer struct {
	c     *fiber.Ctx
	chain *guard.Chain
}

var (
	_ guard.ChainWriter = (*writer)(nil)
	_ guard.BytesWriter = (*writer)(nil)
)

// Chain implements guard.ChainWriter.
func (w *writer) Chain() *guard.Chain { return w.chain }

// SetHeader implements guard.Writer. fasthttp copies the value. A name
// the Guard sets (see canonicalName) with a value of at most
// maxStackValue bytes, such as RateLimit-Policy, is set with SetCanonical
// from a copy of the value on the stack; any other with Set, which
// normalizes the name as the app asks.
func (w *writer) SetHeader(name, value string) {
	h := &w.c.Response().Header
	if k := canonicalName(name); k != nil && len(value) <= maxStackValue {
		var buf [maxStackValue]byte
		h.SetCanonical(k, append(buf[:0], value...))
		return
	}
	h.Set(name, value)
}

// maxStackValue is the longest value SetHeader copies on the stack.
const maxStackValue = 256

// SetHeaderBytes implements guard.BytesWriter. fasthttp copies the value.
// A name the Guard sets (see canonicalName) is set with SetCanonical, any
// other with SetBytesV, which normalizes the name as the app asks.
func (w *writer) SetHeaderBytes(name string, value []byte) {
	h := &w.c.Response().Header
	if k := canonicalName(name); k != nil {
		h.SetCanonical(k, value)
		return
	}
	h.SetBytesV(name, value)
}

// WriteResponse implements guard.Writer. The body is copied.
func (w *writer) WriteResponse(status int, body []byte) error {
	resp := w.c.Response()
	resp.SetStatusCode(status)
	resp.SetBody(body)
	return nil
}

// errNotFiber is returned by the functions of KeyFunc and Locals when they
// are called with a request that does not come from this package.
var errNotFiber = errors.New("fiberlimit: key function called with a request not from fiberlimit")

// Ctx returns the *fiber.Ctx behind r, a request the middleware of this
// package hands to key, cost and skip functions, handlers and hooks; nil
// for any other keyfuncs.Request. Like r, it is valid only until the
// middleware returns, and the strings it returns only until then too: a
// keyfuncs.Func written over it must return a copy (strings.Clone), as
// KeyFunc does for its function.
func Ctx(r keyfuncs.Request) *fiber.Ctx {
	if v, ok := r.(view); ok {
		return v.c
	}
	return nil
}
