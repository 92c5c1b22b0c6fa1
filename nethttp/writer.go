package nethttp

import (
	"bufio"
	"io"
	"net"
	"net/http"

	"github.com/tollgate/tollgate/guard"
)

// writer is the guard.ChainWriter of a request and the
// http.ResponseWriter the handler writes to, which records the status and
// size and carries the request's chain to the middlewares further in.
// Writers are pooled (see writers): nothing refers to one once its
// middleware returns, as net/http requires of a ResponseWriter ("may not
// be used after [Handler.ServeHTTP] has returned"), and the values of the
// headers the Guard sets are not kept in it (see guard.HeaderWriter).
type writer struct {
	w      http.ResponseWriter
	chain  *guard.Chain // own, or that of a middleware around this one
	own    guard.Chain
	wrote  bool
	status int
	bytes  int64
}

var (
	_ guard.ChainWriter  = (*writer)(nil)
	_ guard.HeaderWriter = (*writer)(nil)
)

// reset empties x for its pool. A writer that served as the first
// middleware of its request keeps its Chain's state from then on
// (guard.Chain.Keep); one that only serves inside another holds none.
func (x *writer) reset() {
	if x.chain == &x.own {
		x.own.Keep()
	}
	*x = writer{own: x.own}
}

// Chain implements guard.ChainWriter, and lets guard.FindChain find the
// chain from the writer the handler receives.
func (x *writer) Chain() *guard.Chain { return x.chain }

// SetHeader implements guard.Writer. name is canonical.
func (x *writer) SetHeader(name, value string) { x.w.Header()[name] = []string{value} }

// ResponseHeader implements guard.HeaderWriter.
func (x *writer) ResponseHeader() http.Header { return x.w.Header() }

// WriteResponse implements guard.Writer.
func (x *writer) WriteResponse(status int, body []byte) error {
	x.w.WriteHeader(status)
	_, err := x.w.Write(body)
	return err
}

// Header implements http.ResponseWriter.
func (x *writer) Header() http.Header { return x.w.Header() }

// WriteHeader implements http.ResponseWriter. Informational (1xx) codes
// other than 101 are passed on without counting as the status.
func (x *writer) WriteHeader(code int) {
	if !x.wrote && (code < 100 || code > 199 || code == http.StatusSwitchingProtocols) {
		x.wrote, x.status = true, code
	}
	x.w.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (x *writer) Write(b []byte) (int, error) {
	x.implicit200()
	n, err := x.w.Write(b)
	x.bytes += int64(n)
	return n, err
}

// ReadFrom implements io.ReaderFrom, so that io.Copy keeps using the
// underlying writer's ReadFrom (sendfile) when it has one.
func (x *writer) ReadFrom(src io.Reader) (int64, error) {
	x.implicit200()
	n, err := io.Copy(x.w, src)
	x.bytes += n
	return n, err
}

// Flush implements http.Flusher; it does nothing when the underlying
// writer cannot flush.
func (x *writer) Flush() { _ = x.FlushError() }

// FlushError flushes through http.ResponseController, which reports
// http.ErrNotSupported when the underlying writer cannot flush.
func (x *writer) FlushError() error {
	x.implicit200()
	return http.NewResponseController(x.w).Flush()
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (x *writer) Unwrap() http.ResponseWriter { return x.w }

func (x *writer) implicit200() {
	if !x.wrote {
		x.wrote, x.status = true, http.StatusOK
	}
}

// result returns what the handler wrote: net/http sends 200 when it wrote
// nothing.
func (x *writer) result() guard.Result {
	if !x.wrote {
		return guard.Result{Status: http.StatusOK, Bytes: x.bytes}
	}
	return guard.Result{Status: x.status, Bytes: x.bytes}
}

// hijackWriter is a writer over a ResponseWriter that can be hijacked
// (HTTP/1), so that a type assertion to http.Hijacker keeps working.
type hijackWriter struct{ writer }

// Hijack implements http.Hijacker. A hijacked response counts as status 101.
func (x *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(x.w).Hijack()
	if err == nil && !x.wrote {
		x.wrote, x.status = true, http.StatusSwitchingProtocols
	}
	return c, rw, err
}

// canHijack reports whether w, or a writer it wraps, is an http.Hijacker.
func canHijack(w http.ResponseWriter) bool {
	for range 16 {
		switch u := w.(type) {
		case http.Hijacker:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = u.Unwrap()
		default:
			return false
		}
	}
	return false
}
