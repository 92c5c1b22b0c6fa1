package ginlimit

import (
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/guard"
)

// writer is the guard.ChainWriter of one request, over c.Writer. The
// middleware that starts the request's chain (no Tollgate middleware
// around it, found by guard.FindChain) holds the chain in it and installs
// it as c.Writer for the rest of gin's chain, embedding the writer it
// replaces: the middlewares further in, and an http.Handler mounted with
// gin.WrapH, find the chain there. Writers are pooled (see writers): the
// middleware gives its writer back when nothing refers to it any more,
// that is unless a middleware further in kept it inside a c.Writer of its
// own, or a panic went through; the values of the headers the Guard sets
// are not kept in it (see guard.HeaderWriter).
type writer struct {
	gin.ResponseWriter // the c.Writer it replaced, when installed; else nil

	c     *gin.Context
	chain *guard.Chain // own, or that of a middleware around this one
	own   guard.Chain
}

var (
	_ guard.ChainWriter  = (*writer)(nil)
	_ guard.HeaderWriter = (*writer)(nil)
)

// writers holds the writers of requests that are over (see writer).
var writers = sync.Pool{New: func() any { return new(writer) }}

// Chain implements guard.ChainWriter, and lets guard.FindChain find the
// chain from c.Writer.
func (x *writer) Chain() *guard.Chain { return x.chain }

// SetHeader implements guard.Writer. name is canonical, so the value is
// assigned to the header map directly.
func (x *writer) SetHeader(name, value string) { x.c.Writer.Header()[name] = []string{value} }

// ResponseHeader implements guard.HeaderWriter.
func (x *writer) ResponseHeader() http.Header { return x.c.Writer.Header() }

// WriteResponse implements guard.Writer.
func (x *writer) WriteResponse(status int, body []byte) error {
	x.c.Writer.WriteHeader(status)
	_, err := x.c.Writer.Write(body)
	return err
}

// Unwrap returns the writer x replaced as c.Writer, for
// http.ResponseController.
func (x *writer) Unwrap() http.ResponseWriter { return x.ResponseWriter }
