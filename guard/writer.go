package guard

import "context"

// Writer is the response side of a request, as a Guard needs it. Each
// adapter implements it over its framework's response; it is the only type
// an adapter must implement besides keyfuncs.Request.
//
// A Writer is used by one goroutine, for the duration of Serve.
type Writer interface {
	// SetHeader sets the response header name to value, replacing any
	// values it had. The Guard passes names in canonical form (as
	// textproto.CanonicalMIMEHeaderKey returns them, e.g.
	// "Ratelimit-Policy"), so implementations over http.Header may assign
	// to the map directly. It is called before the handler runs, or
	// before WriteResponse.
	SetHeader(name, value string)
	// WriteResponse writes the status code and body of a response the
	// Guard (or its DeniedHandler or ErrorHandler) produces itself: a 429,
	// or an error. The Content-Type is set with SetHeader first. The Guard
	// calls it at most once per request, and never after Next.
	WriteResponse(status int, body []byte) error
}

// Next runs the rest of the chain: the next middleware and the handler.
// ctx is the request's context, or a context derived from it that carries
// the cost slot of WithReportedCost: when it differs from the request's
// context the adapter must pass it on (net/http: r.WithContext(ctx)).
//
// Next returns what the handler wrote. Only a Guard whose NeedsResult
// reports true reads it; adapters may return the zero Result otherwise.
type Next func(ctx context.Context) Result

// Result is what the handler wrote: its status code and the number of body
// bytes. A handler that wrote nothing has Status 200 in net/http terms; the
// adapter reports what its framework would send.
type Result struct {
	// Status is the response's status code.
	Status int
	// Bytes is the number of body bytes written.
	Bytes int64
}

// A BytesWriter is a Writer that also takes a header value as bytes, which
// it copies before SetHeaderBytes returns. Serve sets the values it builds
// for each response (RateLimit, the numbers of the draft-06 and legacy
// fields, Retry-After) through it, which saves converting each to a
// string: fasthttp copies bytes into its own buffers, and HeaderSlots
// keeps them for an http.Header. Serve sets other values, and every value
// of a Writer that is not a BytesWriter, with SetHeader.
type BytesWriter interface {
	Writer
	// SetHeaderBytes is SetHeader with the value as bytes, which the
	// caller may reuse once it returns.
	SetHeaderBytes(name string, value []byte)
}

// setHeaderBytes sets header name to value on w, as bytes when w takes
// them.
func setHeaderBytes(w Writer, name string, value []byte) {
	if bw, ok := w.(BytesWriter); ok {
		bw.SetHeaderBytes(name, value)
		return
	}
	w.SetHeader(name, string(value))
}
