package grpclimit_test

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// TestPeerAddressKeys checks whom an RPC is charged to under keyfuncs.IP:
// the peer, unless the peer is a trusted proxy, whose forwarding metadata
// then names the client.
func TestPeerAddressKeys(t *testing.T) {
	lb := keyfuncs.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))
	for _, c := range []struct {
		name string
		peer string
		key  keyfuncs.Func
		md   []string // metadata pairs the client sends
		want string   // the key charged
	}{
		{
			name: "by default the peer address is the key",
			peer: "203.0.113.9", key: keyfuncs.IP(),
			want: "203.0.113.9",
		},
		{
			name: "by default forwarding metadata is ignored",
			peer: "203.0.113.9", key: keyfuncs.IP(),
			md:   []string{"x-forwarded-for", "198.51.100.1", "x-real-ip", "198.51.100.2"},
			want: "203.0.113.9",
		},
		{
			name: "a hostile x-forwarded-for from an untrusted peer is ignored",
			peer: "203.0.113.9", key: keyfuncs.IP(lb),
			md:   []string{"x-forwarded-for", "198.51.100.1, 10.0.0.7"},
			want: "203.0.113.9",
		},
		{
			name: "a trusted proxy's x-forwarded-for is read right to left, skipping trusted hops",
			peer: "10.0.0.5", key: keyfuncs.IP(lb),
			md:   []string{"x-forwarded-for", "192.0.2.200, 198.51.100.1, 10.0.0.7"},
			want: "198.51.100.1",
		},
		{
			name: "repeated x-forwarded-for values are one list, in order",
			peer: "10.0.0.5", key: keyfuncs.IP(lb),
			md:   []string{"x-forwarded-for", "198.51.100.1", "x-forwarded-for", "10.0.0.7"},
			want: "198.51.100.1",
		},
		{
			name: "a trusted proxy's forwarded metadata is read with FromForwarded",
			peer: "10.0.0.5", key: keyfuncs.IP(lb, keyfuncs.FromForwarded()),
			md:   []string{"forwarded", `for=198.51.100.3;proto=https`},
			want: "198.51.100.3",
		},
		{
			name: "a trusted proxy's x-real-ip is read with FromHeader",
			peer: "10.0.0.5", key: keyfuncs.IP(lb, keyfuncs.FromHeader("X-Real-IP")),
			md:   []string{"x-real-ip", "198.51.100.4"},
			want: "198.51.100.4",
		},
		{
			name: "garbage from a trusted proxy falls back to the proxy",
			peer: "10.0.0.5", key: keyfuncs.IP(lb),
			md:   []string{"x-forwarded-for", "not-an-address"},
			want: "10.0.0.5",
		},
		{
			name: "IPv6 peers are keyed by their /64",
			peer: "2001:db8:1:2::7", key: keyfuncs.IP(),
			want: "2001:db8:1:2::/64",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := guardtest.NewLimiter(t, nil, perMinute(5, "per-minute"))
			svc := &service{}
			cl := serve(t, c.peer, svc, grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, grpclimit.WithKey(c.key))))
			if r := callUnary(t, cl, 0, c.md...); r.err != nil {
				t.Fatal(r.err)
			}
			if n := remaining(t, lim, c.want); n != 4 {
				t.Errorf("remaining for %q = %d, want 4: the RPC is charged to it", c.want, n)
			}
			for _, other := range []string{c.peer, "198.51.100.1", "198.51.100.2"} {
				if other != c.want && remaining(t, lim, other) != 5 {
					t.Errorf("%q was charged, want only %q", other, c.want)
				}
			}
		})
	}
}

func TestAPeerThatIsNotAnIPAddressFailsTheIPKeyWithInternal(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(5, "per-minute"))
	svc := &service{}
	c := serve(t, "", svc, grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim))) // bufconn's own address
	r := callUnary(t, c, 0)
	if r.code() != codes.Internal {
		t.Fatalf("code %v (%v), want Internal", r.code(), r.err)
	}
	if strings.Contains(r.err.Error(), "bufconn") {
		t.Errorf("message %q holds the peer's address", r.err)
	}
	if svc.calls.Load() != 0 {
		t.Error("the handler ran: an RPC without its key must not pass unlimited")
	}
}

func TestMetadataKeys(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(5, "per-minute"))
	svc := &service{}
	c := unaryServer(t, svc, grpclimit.UnaryServerInterceptor(lim, grpclimit.WithKey(keyfuncs.Header("X-Api-Key"))))

	t.Run("the metadata value is the key", func(t *testing.T) {
		if r := callUnary(t, c, 0, "x-api-key", "k-123"); r.err != nil {
			t.Fatal(r.err)
		}
		if n := remaining(t, lim, "k-123"); n != 4 {
			t.Errorf("remaining for k-123 = %d, want 4", n)
		}
	})
	t.Run("an RPC without it fails with InvalidArgument naming what it lacks", func(t *testing.T) {
		r := callUnary(t, c, 0)
		if r.code() != codes.InvalidArgument {
			t.Fatalf("code %v (%v), want InvalidArgument", r.code(), r.err)
		}
		if msg, want := r.err.Error(), "missing header X-Api-Key"; !strings.Contains(msg, want) {
			t.Errorf("message %q, want it to say %q", msg, want)
		}
	})
	t.Run("a value too long fails without echoing it", func(t *testing.T) {
		long := strings.Repeat("s", keyfuncs.MaxKeyLen+1)
		r := callUnary(t, c, 0, "x-api-key", long)
		if r.code() != codes.InvalidArgument {
			t.Fatalf("code %v (%v), want InvalidArgument", r.code(), r.err)
		}
		if strings.Contains(r.err.Error(), "sss") {
			t.Errorf("message %q echoes the value", r.err)
		}
	})
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

func TestKeyFunctionsOverTheRPCsContext(t *testing.T) {
	type userKey struct{}
	// auth is an authentication interceptor that runs first.
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(context.WithValue(ctx, userKey{}, "alice"), req)
	}
	lim := guardtest.NewLimiter(t, nil, perMinute(5, "per-minute"))
	var method string
	c := unaryServer(t, &service{}, auth, grpclimit.UnaryServerInterceptor(lim,
		grpclimit.WithKeyFunc(func(ctx context.Context, fullMethod string) (string, error) {
			method = fullMethod
			u, _ := ctx.Value(userKey{}).(string)
			return u, nil
		})))
	if r := callUnary(t, c, 0); r.err != nil {
		t.Fatal(r.err)
	}
	if n := remaining(t, lim, "alice"); n != 4 {
		t.Errorf("remaining for alice = %d, want 4", n)
	}
	if method != unaryMethod {
		t.Errorf("the key function saw the method %q, want %q", method, unaryMethod)
	}
}

func TestAnEmptyKeyFromAKeyFunctionFailsUnlessOptional(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(5, "per-minute"))
	users := guardtest.NewLimiter(t, nil, perMinute(1, "per-user"))
	anonymous := func(context.Context, string) (string, error) { return "", nil }
	for _, c := range []struct {
		name string
		opt  grpclimit.Option
		want codes.Code
	}{
		{"a required key fails the RPC", grpclimit.WithKeyFunc(anonymous), codes.InvalidArgument},
		{"an optional rule exempts the RPC", grpclimit.WithRule(users, guard.Optional(grpclimit.KeyFunc(anonymous))), codes.OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := unaryServer(t, &service{}, grpclimit.UnaryServerInterceptor(lim, c.opt))
			if r := callUnary(t, cl, 0); r.code() != c.want {
				t.Errorf("code %v (%v), want %v", r.code(), r.err, c.want)
			}
		})
	}
}

func TestTheRouteKeyIsTheFullMethod(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(5, "per-minute"))
	c := unaryServer(t, &service{}, grpclimit.UnaryServerInterceptor(lim, grpclimit.WithKey(keyfuncs.Route())))
	if r := callUnary(t, c, 0); r.err != nil {
		t.Fatal(r.err)
	}
	if n := remaining(t, lim, unaryMethod); n != 4 {
		t.Errorf("remaining for %q = %d, want 4", unaryMethod, n)
	}
}

func TestKeyFuncRejectsRequestsFromOtherAdapters(t *testing.T) {
	fn := grpclimit.KeyFunc(func(context.Context, string) (string, error) { return "k", nil })
	if _, err := fn(keyfuncs.FromHTTP(httptest.NewRequest("GET", "/", nil))); err == nil {
		t.Error("KeyFunc over an HTTP request: no error, want one")
	}
	if grpclimit.KeyFunc(nil) != nil {
		t.Error("KeyFunc(nil) is not nil")
	}
}
