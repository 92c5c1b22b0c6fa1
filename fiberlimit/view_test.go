package fiberlimit

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/keyfuncs"
)

// remoteOnly is a view without PeerAddr: IP reads its RemoteAddr.
type remoteOnly struct{ keyfuncs.Request }

// viewFrom returns the view of a request from peer, carrying an
// X-Forwarded-For of xff unless it is empty; it is released with t.
func viewFrom(t *testing.T, peer net.Addr, xff string) view {
	t.Helper()
	app := fiber.New()
	var req fasthttp.Request
	req.Header.SetMethod(fiber.MethodGet)
	req.SetRequestURI("/")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	fctx := new(fasthttp.RequestCtx)
	fctx.Init(&req, peer, nil)
	c := app.AcquireCtx(fctx)
	t.Cleanup(func() { app.ReleaseCtx(c) })
	return view{c}
}

func TestViewPeerAddrGivesTheKeysOfRemoteAddr(t *testing.T) {
	peers := []struct {
		name string
		addr *net.TCPAddr
	}{
		{"an IPv4 peer, 16-byte form", &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 1234}},
		{"an IPv4 peer, 4-byte form", &net.TCPAddr{IP: net.IP{203, 0, 113, 7}, Port: 1234}},
		{"an IPv6 peer", &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 443}},
		{"an IPv6 peer with a zone", &net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 443, Zone: "eth0"}},
		{"a trusted IPv4 proxy", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 443}},
		{"a trusted IPv6 proxy", &net.TCPAddr{IP: net.ParseIP("fd00::1"), Port: 443}},
	}
	trusted := keyfuncs.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"))
	funcs := []struct {
		name string
		fn   keyfuncs.Func
	}{
		{"IP()", keyfuncs.IP()},
		{"IP(IPv4Prefix(24), IPv6Prefix(128))", keyfuncs.IP(keyfuncs.IPv4Prefix(24), keyfuncs.IPv6Prefix(128))},
		{"IP(TrustProxies(10/8, fd00::/8))", keyfuncs.IP(trusted)},
	}
	for _, p := range peers {
		for _, f := range funcs {
			t.Run(p.name+" has the same key from PeerAddr as from RemoteAddr with "+f.name, func(t *testing.T) {
				v := viewFrom(t, p.addr, "6.6.6.6, 198.51.100.1")
				want, err := f.fn(remoteOnly{v})
				if err != nil {
					t.Fatalf("%s(RemoteAddr %q) = %q, %v; want a key", f.name, v.RemoteAddr(), want, err)
				}
				if got, err := f.fn(v); err != nil || got != want {
					t.Errorf("%s(PeerAddr of %v) = %q, %v; want %q", f.name, p.addr, got, err, want)
				}
			})
		}
		t.Run(p.name+" is the address RemoteAddr formats, without allocating", func(t *testing.T) {
			v := viewFrom(t, p.addr, "")
			got, ok := v.PeerAddr()
			if want, err := netip.ParseAddrPort(v.RemoteAddr()); err != nil || !ok || got != want {
				t.Errorf("PeerAddr() = %v, %v; want %v, true (RemoteAddr %q, %v)", got, ok, want, v.RemoteAddr(), err)
			}
			if n := testing.AllocsPerRun(100, func() { v.PeerAddr() }); n != 0 {
				t.Errorf("PeerAddr() allocates %v times, want 0", n)
			}
		})
	}
	for _, tt := range []struct {
		name string
		addr net.Addr
	}{
		{"a Unix socket peer", &net.UnixAddr{Name: "/tmp/s", Net: "unix"}},
		{"a nil *net.TCPAddr", (*net.TCPAddr)(nil)},
	} {
		t.Run(tt.name+" has no PeerAddr", func(t *testing.T) {
			if got, ok := viewFrom(t, tt.addr, "").PeerAddr(); ok {
				t.Errorf("PeerAddr() = %v, true; want false", got)
			}
		})
	}
}

// BenchmarkIPKey derives the default key of an IPv4 peer from view,
// through PeerAddr and through RemoteAddr.
func BenchmarkIPKey(b *testing.B) {
	fn := keyfuncs.IP()
	app := fiber.New()
	var req fasthttp.Request
	fctx := new(fasthttp.RequestCtx)
	fctx.Init(&req, &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 1234}, nil)
	c := app.AcquireCtx(fctx)
	defer app.ReleaseCtx(c)
	for _, r := range []struct {
		name string
		req  keyfuncs.Request
	}{
		{"PeerAddr", view{c}},
		{"RemoteAddr", remoteOnly{view{c}}},
	} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fn(r.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
