package echolimit

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// gate is one request as a Guard sees it: both its keyfuncs.Request and
// its guard.Writer, over the echo.Context. One allocation per request
// serves both, and the options below reach the echo.Context through it.
type gate struct {
	c     echo.Context
	next  echo.HandlerFunc
	err   error // the next handler's error, when not committed
	track bool  // commit the handler's error and report the status
	nhv   int
	hv    [4]string // storage for the values of the headers the Guard sets
}

var (
	_ keyfuncs.Request = (*gate)(nil)
	_ guard.Writer     = (*gate)(nil)
)

// call is the guard.Next of the request: it runs the rest of echo's chain
// with ctx as the request's context.
func (x *gate) call(ctx context.Context) guard.Result {
	c := x.c
	if r := c.Request(); ctx != r.Context() {
		c.SetRequest(r.WithContext(ctx))
	}
	err := x.next(c)
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

// Context implements keyfuncs.Request.
func (x *gate) Context() context.Context { return x.c.Request().Context() }

// SetHeader implements guard.Writer. name is canonical.
func (x *gate) SetHeader(name, value string) {
	h := x.c.Response().Header()
	if x.nhv < len(x.hv) {
		i := x.nhv
		x.nhv++
		x.hv[i] = value
		h[name] = x.hv[i : i+1 : i+1]
		return
	}
	h[name] = []string{value}
}

// GetHeader implements guard.HeaderGetter. name is canonical.
func (x *gate) GetHeader(name string) string {
	if v := x.c.Response().Header()[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// WriteResponse implements guard.Writer, through echo's Response so that
// its Status, Size and Committed are kept.
func (x *gate) WriteResponse(status int, body []byte) error {
	res := x.c.Response()
	res.WriteHeader(status)
	_, err := res.Write(body)
	return err
}

var _ guard.HeaderGetter = (*gate)(nil)
