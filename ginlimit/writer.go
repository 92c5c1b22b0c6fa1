package ginlimit

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/guard"
)

// writer is the guard.ChainWriter of one request, over c.Writer. The
// middleware that starts the request's chain (no Tollgate middleware
// around it, found by guard.FindChain) holds the chain in it and installs
// it as c.Writer for the rest of gin's chain, embedding the writer it
// replaces: the middlewares further in, and an http.Handler mounted with
// gin.WrapH, find the chain there. One allocation per request serves
// both, and holds the values of the headers the Guard sets.
type writer struct {
	gin.ResponseWriter // the c.Writer it replaced, when installed; else nil

	c     *gin.Context
	chain *guard.Chain // own, or that of a middleware around this one
	own   guard.Chain
	slots guard.HeaderSlots
}

var (
	_ guard.ChainWriter = (*writer)(nil)
	_ guard.BytesWriter = (*writer)(nil)
)

// Chain implements guard.ChainWriter, and lets guard.FindChain find the
// chain from c.Writer.
func (x *writer) Chain() *guard.Chain { return x.chain }

// SetHeader implements guard.Writer. name is canonical, so the value is
// assigned to the header map directly.
func (x *writer) SetHeader(name, value string) { x.slots.Set(x.c.Writer.Header(), name, value) }

// SetHeaderBytes implements guard.BytesWriter.
func (x *writer) SetHeaderBytes(name string, value []byte) {
	x.slots.SetBytes(x.c.Writer.Header(), name, value)
}

// WriteResponse implements guard.Writer.
func (x *writer) WriteResponse(status int, body []byte) error {
	x.c.Writer.WriteHeader(status)
	_, err := x.c.Writer.Write(body)
	return err
}

// Unwrap returns the writer x replaced as c.Writer, for
// http.ResponseController.
func (x *writer) Unwrap() http.ResponseWriter { return x.ResponseWriter }
