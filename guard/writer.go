package guard

import (
	"context"
	"net/http"
	"sync"
	"unsafe"
)

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
// the cost slot of WithReportedCost: when the Guard has that option
// (ReportsCost) the adapter must pass it on (net/http: r.WithContext(ctx)).
// It need not compare the two contexts, and must not with ==, which
// panics on a context of a type it cannot compare.
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
// it copies before SetHeaderBytes returns, as fasthttp does. Serve sets
// the values it builds for each response (RateLimit, the numbers of the
// draft-06 and legacy fields, Retry-After) through it, which saves
// converting each to a string: fasthttp copies bytes into its own
// buffers. (A Writer over an http.Header is better a HeaderWriter, which
// Serve prefers when a Writer is both.) Serve sets other values, and every
// value of a Writer that is neither a BytesWriter nor a HeaderWriter, with
// SetHeader.
type BytesWriter interface {
	Writer
	// SetHeaderBytes is SetHeader with the value as bytes, which the
	// caller may reuse once it returns.
	SetHeaderBytes(name string, value []byte)
}

// A HeaderWriter is a Writer over an http.Header: the adapters for
// net/http, gin and echo implement it. Serve sets the rate-limit headers in the
// map itself, at the cost of a fraction of an allocation per response: the
// values it builds (RateLimit, the numbers of the draft-06 and legacy
// fields, Retry-After), with their []string, in chunks of memory shared by
// many responses; RateLimit-Policy, the same on every response of a route,
// as a []string it keeps per list of policies and shares between the
// responses. A handler may replace, add to or delete these headers with
// the methods of http.Header, which never write into a []string they did
// not make; it must not write into the slice itself (h[k][0] = v). Serve
// sets other headers with SetHeader.
type HeaderWriter interface {
	Writer
	// ResponseHeader returns the header map of the response, as
	// http.ResponseWriter.Header does.
	ResponseHeader() http.Header
}

// A headerSink is where setHeaders writes one response's headers: the
// Writer, and its header map when it is a HeaderWriter, asked for once.
// A HeaderWriter whose ResponseHeader is nil is written to as the Writer
// it also is, through SetHeaderBytes or SetHeader, not into a nil map.
type headerSink struct {
	w Writer
	h http.Header // w's map, when w is a HeaderWriter; nil otherwise
}

// sinkOf returns w's headerSink.
func sinkOf(w Writer) headerSink {
	if x, ok := w.(HeaderWriter); ok {
		return headerSink{w, x.ResponseHeader()}
	}
	return headerSink{w: w}
}

// setBytes sets header name to value: in the map at the cost of a fraction
// of an allocation, as bytes when the Writer takes them, else as a string.
func (s headerSink) setBytes(name string, value []byte) {
	if s.h != nil {
		s.h[name] = headerValue(value)
		return
	}
	if x, ok := s.w.(BytesWriter); ok {
		x.SetHeaderBytes(name, value)
		return
	}
	s.w.SetHeader(name, string(value))
}

// setPolicy sets RateLimit-Policy to pc's value: in a map, the []string
// pc keeps for every response.
func (s headerSink) setPolicy(pc *policyCache) {
	if s.h != nil {
		s.h[HeaderRateLimitPolicy] = pc.list
		return
	}
	s.w.SetHeader(HeaderRateLimitPolicy, pc.value)
}

// headerValue returns a copy of b as the values of an http.Header field.
// Values up to maxArenaValue bytes, and their []string, are carved out of
// an arena: chunks of memory shared by many responses, each part written
// once and then only read, so that a response costs a fraction of an
// allocation; a chunk is garbage once no header refers to any of it.
func headerValue(b []byte) []string {
	if len(b) == 0 || len(b) > maxArenaValue {
		return []string{string(b)}
	}
	a := arenas.Get().(*arena)
	if len(a.bytes) < len(b) {
		a.bytes = make([]byte, arenaBytes)
	}
	if len(a.slots) == 0 {
		a.slots = make([]string, arenaSlots)
	}
	n := copy(a.bytes, b)
	v := a.slots[:1:1] // the capacity keeps an append from writing over the next slot
	v[0] = unsafe.String(&a.bytes[0], n)
	a.bytes, a.slots = a.bytes[n:], a.slots[1:]
	arenas.Put(a)
	return v
}

// An arena is the unused part of the chunks headerValue carves values
// from: bytes for the values, slots for their []string. What it handed
// out is never written again.
type arena struct {
	bytes []byte
	slots []string
}

const (
	arenaBytes    = 4096
	arenaSlots    = 128
	maxArenaValue = 256
)

// arenas holds the arenas of headerValue, one per P or so.
var arenas = sync.Pool{New: func() any { return new(arena) }}
