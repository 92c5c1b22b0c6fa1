package keyfuncs

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"testing"
)

// socketRequest is a request that says, as the adapters' requests do from
// their connection, whether it came over a Unix socket; it may also
// report its peer by PeerAddr, as fiber's and gRPC's do.
type socketRequest struct {
	*fakeRequest
	unix bool
}

func (s socketRequest) UnixSocket() bool { return s.unix }

type socketAddrRequest struct{ socketRequest }

func (socketAddrRequest) PeerAddr() (netip.AddrPort, bool) { return netip.AddrPort{}, false }

var (
	_ UnixSocketRequest = socketRequest{}
	_ PeerAddrRequest   = socketAddrRequest{}
)

// A request that knows its connection is believed over RemoteAddr's text,
// which is "" for an unnamed Unix peer on macOS and the BSDs, and which a
// layer in front that rewrites RemoteAddr could make "@".
func TestIPAsksTheConnectionWhetherItIsAUnixSocket(t *testing.T) {
	xff := []string{"X-Forwarded-For", "198.51.100.1"}
	for _, tt := range []struct {
		name    string
		opts    []IPOption
		req     Request
		want    string
		wantErr error
	}{
		{"an empty RemoteAddr on a trusted Unix socket (macOS, BSD) reads the header", unixConf, socketRequest{peerRequest("", xff...), true}, "198.51.100.1", nil},
		{"so does a peer known to PeerAddr as none", unixConf, socketAddrRequest{socketRequest{peerRequest("", xff...), true}}, "198.51.100.1", nil},
		{"a RemoteAddr of \"@\" off a Unix socket is not trusted", unixConf, socketRequest{peerRequest("@", xff...), false}, "", ErrBadAddress},
		{"a socket path off a Unix socket is not trusted", unixConf, socketRequest{peerRequest("/run/app.sock", xff...), false}, "", ErrBadAddress},
		{"an untrusted Unix socket with an empty RemoteAddr is a bad address", nil, socketRequest{peerRequest("", xff...), true}, "", ErrBadAddress},
		{"an IP peer on a Unix socket is keyed by its address", unixConf, socketRequest{peerRequest("203.0.113.7:1", xff...), true}, "203.0.113.7", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IP(tt.opts...)(tt.req)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("IP = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	// Without the option the error names it, for the logs.
	if _, err := IP()(socketRequest{peerRequest(""), true}); err == nil || err.Error() != errUnixPeer.Error() {
		t.Errorf("untrusted Unix socket: %v, want %v", err, errUnixPeer)
	}
}

// OnUnixSocket tells a request served over a Unix socket from one served
// over TCP, by the connection and not by RemoteAddr.
func TestOnUnixSocket(t *testing.T) {
	got := make(chan bool, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- OnUnixSocket(r) && FromHTTP(r).(UnixSocketRequest).UnixSocket()
	})
	serve := func(network, addr string) string {
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		return l.Addr().String()
	}
	get := func(network, addr string) bool {
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("http://app/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return <-got
	}
	sock := filepath.Join(t.TempDir(), "app.sock")
	serve("unix", sock)
	if !get("unix", sock) {
		t.Error("a request over a Unix socket: OnUnixSocket = false")
	}
	tcp := serve("tcp", "127.0.0.1:0")
	if get("tcp", tcp) {
		t.Error("a request over TCP: OnUnixSocket = true")
	}
}
