package guardtest

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/keyfuncs"
)

// ServeFunc starts an adapter's server on l, closed with t: one route,
// GET /, answering 200 behind the adapter's middleware over lim, keyed by
// key (the adapter's default key when key is nil).
type ServeFunc func(t *testing.T, l net.Listener, lim *core.Limiter, key keyfuncs.Func)

// UnixSocketProxy checks an adapter behind a reverse proxy on the same
// host that forwards over a Unix socket, over a real one: the peer is then
// no address (net/http's RemoteAddr "@" on Linux, "" on macOS and the
// BSDs). By default no request from it has a client address, and each
// gets a 500 that tells nothing of why; trusted with
// keyfuncs.TrustUnixSocket, X-Forwarded-For names the client, and a
// request without a usable one is a 500. The adapter must ask the
// connection whether it is a Unix socket (keyfuncs.UnixSocketRequest):
// a socket whose peer reads "" is one, and a TCP connection whose peer
// reads "@" is not.
func UnixSocketProxy(t *testing.T, serve ServeFunc) {
	// client serves the adapter on a listener of network whose
	// connections report the peer remote (nil: their own), and returns a
	// client of it.
	client := func(t *testing.T, key keyfuncs.Func, network string, remote net.Addr) *http.Client {
		l, dial := Listen(t, network, remote)
		serve(t, l, NewLimiter(t, nil, core.PerMinute(1).WithAlgorithm(core.FixedWindow).Named("m")), key)
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	get := func(t *testing.T, c *http.Client, xff string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://app/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	trusting := keyfuncs.IP(keyfuncs.TrustUnixSocket())
	trusted := func(t *testing.T, c *http.Client) {
		for i, s := range []struct {
			xff  string
			want int
		}{
			{"198.51.100.1", 200},
			{"6.6.6.6, 198.51.100.1", 429}, // the proxy's entry is the rightmost
			{"198.51.100.2", 200},
			{"", 500},
			{"garbage", 500},
		} {
			if got, body := get(t, c, s.xff); got != s.want {
				t.Errorf("request %d, X-Forwarded-For %q: %d %s, want %d", i, s.xff, got, body, s.want)
			}
		}
	}
	noKey := func(t *testing.T, c *http.Client) {
		for _, xff := range []string{"198.51.100.1", "6.6.6.6"} {
			got, body := get(t, c, xff)
			if got != 500 || strings.Contains(body, "keyfuncs") || strings.Contains(body, "Unix") {
				t.Errorf("X-Forwarded-For %q: %d %s, want a 500 that tells nothing of the cause", xff, got, body)
			}
		}
	}
	t.Run("trusted", func(t *testing.T) { trusted(t, client(t, trusting, "unix", nil)) })
	t.Run("trusted, the peer read as empty (macOS, BSD)", func(t *testing.T) {
		trusted(t, client(t, trusting, "unix", &net.UnixAddr{Name: "", Net: "unix"}))
	})
	t.Run("not trusted", func(t *testing.T) { noKey(t, client(t, nil, "unix", nil)) })
	t.Run("a TCP connection whose peer reads as a socket's is not one", func(t *testing.T) {
		noKey(t, client(t, trusting, "tcp", &net.UnixAddr{Name: "@", Net: "unix"}))
	})
}

// Listen listens on network, "tcp" (loopback) or "unix" (a socket file
// in a temporary directory), and returns the listener and a dialer of
// it. When remote is not nil, the listener's connections report it as
// their peer, as a layer in front that rewrites the peer's address would.
func Listen(t *testing.T, network string, remote net.Addr) (net.Listener, func(context.Context) (net.Conn, error)) {
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "app.sock")
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	if remote != nil {
		l = WithPeer(l, remote)
	}
	return l, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// WithPeer returns l with its connections reporting remote as their
// peer.
func WithPeer(l net.Listener, remote net.Addr) net.Listener { return peerListener{l, remote} }

type peerListener struct {
	net.Listener
	remote net.Addr
}

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return peerConn{c, l.remote}, nil
}

type peerConn struct {
	net.Conn
	remote net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.remote }

// ServeHTTP is the ServeFunc of an adapter whose middleware wraps an
// http.Handler: handler builds the server's handler from lim and key.
func ServeHTTP(handler func(lim *core.Limiter, key keyfuncs.Func) http.Handler) ServeFunc {
	return func(t *testing.T, l net.Listener, lim *core.Limiter, key keyfuncs.Func) {
		srv := &http.Server{Handler: handler(lim, key)}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
	}
}
