package keyfuncs_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/netip"

	"github.com/tollgate/tollgate/keyfuncs"
)

// By default IP keys on the connection's peer and ignores forwarding
// headers, which any client can write.
func ExampleIP() {
	key := keyfuncs.IP()

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.7:51234"
	r.Header.Set("X-Forwarded-For", "6.6.6.6") // spoofed
	fmt.Println(key(keyfuncs.FromHTTP(r)))

	r.RemoteAddr = "[2001:db8:1:2:a:b:c:d]:443" // IPv6 clients are grouped by /64
	fmt.Println(key(keyfuncs.FromHTTP(r)))
	// Output:
	// 203.0.113.7 <nil>
	// 2001:db8:1:2::/64 <nil>
}

// Behind a load balancer, trust its network: X-Forwarded-For is then read
// right to left, skipping trusted hops, and the first untrusted address is
// the client. Whatever a client prepends is never reached.
func ExampleIP_trustedProxies() {
	trust, err := keyfuncs.TrustProxyCIDRs("10.0.0.0/8")
	if err != nil {
		fmt.Println(err)
		return
	}
	key := keyfuncs.IP(trust)

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:443"                                      // the load balancer
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 198.51.100.1, 10.0.0.2") // spoofed, client, inner proxy
	fmt.Println(key(keyfuncs.FromHTTP(r)))

	r.RemoteAddr = "203.0.113.7:443" // not a trusted proxy: the header is ignored
	fmt.Println(key(keyfuncs.FromHTTP(r)))
	// Output:
	// 198.51.100.1 <nil>
	// 203.0.113.7 <nil>
}

// The RFC 7239 Forwarded header, with quoted IPv6 addresses and ports.
func ExampleFromForwarded() {
	key := keyfuncs.IP(keyfuncs.TrustLoopback(), keyfuncs.FromForwarded())

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "127.0.0.1:8080"
	r.Header.Set("Forwarded", `for="[2001:db8:cafe::17]:4711";proto=https`)
	fmt.Println(key(keyfuncs.FromHTTP(r)))

	r.Header.Set("Forwarded", "for=unknown") // not an address: the proxy is the key
	fmt.Println(key(keyfuncs.FromHTTP(r)))
	// Output:
	// 2001:db8:cafe::/64 <nil>
	// 127.0.0.1 <nil>
}

// A platform header such as Cloudflare's CF-Connecting-IP, trusted only
// from the platform's addresses.
func ExampleFromHeader() {
	key := keyfuncs.IP(
		keyfuncs.TrustProxies(netip.MustParsePrefix("173.245.48.0/20")),
		keyfuncs.FromHeader("CF-Connecting-IP"),
		keyfuncs.IPv4Prefix(24),
	)

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "173.245.48.5:443"
	r.Header.Set("CF-Connecting-IP", "198.51.100.77")
	fmt.Println(key(keyfuncs.FromHTTP(r)))
	// Output:
	// 198.51.100.0/24 <nil>
}

// NewIP reports invalid options, e.g. from configuration, instead of
// panicking as IP does.
func ExampleNewIP() {
	_, err := keyfuncs.NewIP(keyfuncs.IPv6Prefix(129))
	fmt.Println(errors.Is(err, keyfuncs.ErrInvalidOption))

	_, err = keyfuncs.TrustProxyCIDRs("10.0.0.0/8", "not-a-cidr")
	fmt.Println(errors.Is(err, keyfuncs.ErrInvalidOption))
	// Output:
	// true
	// true
}

type userKey struct{}

// A key per authenticated user, and per route: the user ID is set in the
// request context by an authentication middleware that runs first.
func ExampleJoin() {
	key := keyfuncs.Join("|", keyfuncs.ContextValue(userKey{}), keyfuncs.Route())

	r := httptest.NewRequest("GET", "/users/42", nil)
	r.Pattern = "GET /users/{id}" // set by http.ServeMux
	r = r.WithContext(context.WithValue(r.Context(), userKey{}, "alice"))
	fmt.Println(key(keyfuncs.FromHTTP(r)))
	// Output:
	// alice|GET /users/{id} <nil>
}

// A missing header is not a key: the error lets the middleware reject the
// request or fall back to another key.
func ExampleHeader() {
	key := keyfuncs.Header("X-API-Key")

	r := httptest.NewRequest("GET", "/", nil)
	_, err := key(keyfuncs.FromHTTP(r))
	fmt.Println(errors.Is(err, keyfuncs.ErrNoKey))

	r.Header.Set("X-API-Key", "k-123")
	fmt.Println(key(keyfuncs.FromHTTP(r)))
	// Output:
	// true
	// k-123 <nil>
}
