package echolimit

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// gate is one request as a Guard sees it: both its keyfuncs.Request and
// its guard.ChainWriter, a guard.HeaderWriter over the echo.Context. One
// value per request serves both, holds the request's chain, and lets the
// options below reach the echo.Context; the values of the headers the
// Guard sets are not kept in it (see guard.HeaderWriter). Gates are
// pooled (gates): one goes back once its middleware returns, unless its
// rw may still be written through (a middleware further in kept it under
// a writer or a Response of its own), or the request panicked.
//
// The middleware that starts the request's chain (no Tollgate middleware
// around it, found by guard.FindChain) installs its rw as
// c.Response().Writer while the rest of echo's chain runs: the
// middlewares further in, and an http.Handler mounted with
// echo.WrapHandler, find the chain there.
type gate struct {
	c        echo.Context
	next     echo.HandlerFunc
	err      error // the next handler's error, when not committed
	track    bool  // commit the handler's error and report the status
	reported bool  // WithReportedCost: only then is the context call receives not the request's
	rw       chainWriter
	own      guard.Chain
	// installed reports that rw is c.Response().Writer, installed by call
	// and not put back: something may still write through it.
	installed bool
}

var _ keyfuncs.UnixSocketRequest = (*gate)(nil)

// gates holds the gates of requests that are over (see gate).
var gates = sync.Pool{New: func() any { return new(gate) }}

// release empties x and puts it back in gates, unless its rw may still be
// written through. A gate that served as the first middleware of its
// request keeps its Chain's state from then on (guard.Chain.Keep); one
// that is dropped, or that only ever serves inside another, holds none.
func (x *gate) release() {
	if x.installed {
		return
	}
	if x.rw.chain == &x.own {
		x.own.Keep()
	}
	*x = gate{own: x.own}
	gates.Put(x)
}

var (
	_ keyfuncs.Request    = (*gate)(nil)
	_ guard.ChainWriter   = (*gate)(nil)
	_ guard.HeaderWriter  = (*gate)(nil)
	_ http.ResponseWriter = (*chainWriter)(nil)
)

// Chain implements guard.ChainWriter.
func (x *gate) Chain() *guard.Chain { return x.rw.chain }

// chainWriter is the http.ResponseWriter that carries the request's chain
// down echo's chain, over the writer it replaced (prev), to which it
// passes every call.
type chainWriter struct {
	chain *guard.Chain        // own, or that of a middleware around this one
	prev  http.ResponseWriter // the writer it replaced, when installed
}

// Chain lets guard.FindChain find the chain from c.Response().Writer.
func (w *chainWriter) Chain() *guard.Chain { return w.chain }

// Header implements http.ResponseWriter.
func (w *chainWriter) Header() http.Header { return w.prev.Header() }

// Write implements http.ResponseWriter.
func (w *chainWriter) Write(b []byte) (int, error) { return w.prev.Write(b) }

// WriteHeader implements http.ResponseWriter.
func (w *chainWriter) WriteHeader(code int) { w.prev.WriteHeader(code) }

// Flush implements http.Flusher, through http.ResponseController; it does
// nothing when the writer replaced cannot flush.
func (w *chainWriter) Flush() { _ = http.NewResponseController(w.prev).Flush() }

// Hijack implements http.Hijacker, through http.ResponseController.
func (w *chainWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.prev).Hijack()
}

// Unwrap returns the writer replaced, for http.ResponseController.
func (w *chainWriter) Unwrap() http.ResponseWriter { return w.prev }

// call is the guard.Next of the request: it runs the rest of echo's chain
// with ctx as the request's context.
func (x *gate) call(ctx context.Context) guard.Result {
	c := x.c
	if x.reported {
		c.SetRequest(c.Request().WithContext(ctx))
	}
	var err error
	if x.rw.prev != nil {
		res := c.Response()
		res.Writer, x.installed = &x.rw, true
		err = x.next(c)
		if res.Writer == http.ResponseWriter(&x.rw) { // unless a middleware further in replaced it for good
			// Put back; but a Response that a middleware further in put
			// in res's place (c.SetResponse) may still write through rw.
			res.Writer, x.installed = x.rw.prev, c.Response() != res
		}
	} else {
		err = x.next(c)
	}
	if !x.track {
		x.err = err
		return guard.Result{}
	}
	if err != nil {
		c.Error(err) // send the error response now: its status is the one to settle
	}
	res := c.Response()
	if !res.Committed { // net/http sends 200 when the handler wrote nothing
		return guard.Result{Status: http.StatusOK, Bytes: res.Size}
	}
	return guard.Result{Status: res.Status, Bytes: res.Size}
}

// Method implements keyfuncs.Request.
func (x *gate) Method() string { return keyfuncs.FromHTTP(x.c.Request()).Method() }

// Path implements keyfuncs.Request: the URL path, decoded.
func (x *gate) Path() string { return keyfuncs.FromHTTP(x.c.Request()).Path() }

// Route implements keyfuncs.Request: echo's route path, c.Path(), e.g.
// "/users/:id".
func (x *gate) Route() string { return x.c.Path() }

// Header implements keyfuncs.Request.
func (x *gate) Header(name string) string { return x.c.Request().Header.Get(name) }

// HeaderValues implements keyfuncs.Request.
func (x *gate) HeaderValues(name string) []string { return x.c.Request().Header.Values(name) }

// Query implements keyfuncs.Request. It reads the raw query without
// parsing all of it (and without filling echo's query cache).
func (x *gate) Query(name string) string { return keyfuncs.FromHTTP(x.c.Request()).Query(name) }

// RemoteAddr implements keyfuncs.Request: the transport peer,
// c.Request().RemoteAddr, never echo's RealIP.
func (x *gate) RemoteAddr() string { return x.c.Request().RemoteAddr }

// UnixSocket implements keyfuncs.UnixSocketRequest: whether the request
// came over a Unix socket (see keyfuncs.TrustUnixSocket).
func (x *gate) UnixSocket() bool { return keyfuncs.OnUnixSocket(x.c.Request()) }

// Context implements keyfuncs.Request.
func (x *gate) Context() context.Context { return x.c.Request().Context() }

// SetHeader implements guard.Writer. name is canonical, so the value is
// assigned to the header map directly.
func (x *gate) SetHeader(name, value string) { x.c.Response().Header()[name] = []string{value} }

// ResponseHeader implements guard.HeaderWriter.
func (x *gate) ResponseHeader() http.Header { return x.c.Response().Header() }

// WriteResponse implements guard.Writer, through echo's Response so that
// its Status, Size and Committed are kept.
func (x *gate) WriteResponse(status int, body []byte) error {
	res := x.c.Response()
	res.WriteHeader(status)
	_, err := res.Write(body)
	return err
}
