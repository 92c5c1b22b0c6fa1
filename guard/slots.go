package guard

import (
	"net/http"
	"unsafe"
)

// HeaderSlots holds the values of the headers a Guard sets on one
// response's http.Header, so that an adapter over net/http sets them
// without allocating: http.Header keeps each value in a []string, which
// HeaderSlots takes from storage of its own, and SetBytes copies a value
// into its buffer instead of allocating a string. An adapter keeps one in
// the value it allocates per request anyway (its Writer), and implements
// BytesWriter with it:
//
//	func (x *writer) SetHeader(name, value string)        { x.slots.Set(x.w.Header(), name, value) }
//	func (x *writer) SetHeaderBytes(name string, v []byte) { x.slots.SetBytes(x.w.Header(), name, v) }
//
// Its storage holds the headers of a response that passes
// (RateLimit-Policy, and RateLimit up to 64 bytes); values beyond it, such
// as those of a 429, are allocated as they would be without it.
//
// The header map refers to a HeaderSlots' memory for as long as it holds
// the values: a HeaderSlots must serve one response only, never be reset
// or reused for another (so never in a sync.Pool, nor in a value that is).
// The zero value is ready to use. It is used by one goroutine at a time,
// as the Writer is.
type HeaderSlots struct {
	vals [2]string
	nv   uint8
	nb   uint8
	buf  [64]byte
}

// Set sets header name of h to value, replacing any values it had. name
// must be in canonical form, as the names a Guard passes are.
func (s *HeaderSlots) Set(h http.Header, name, value string) {
	if int(s.nv) == len(s.vals) {
		h[name] = []string{value}
		return
	}
	i := s.nv
	s.nv++
	s.vals[i] = value
	h[name] = s.vals[i : i+1 : i+1] // the capacity keeps an append from writing over the next slot
}

// SetBytes sets header name of h to a copy of value, replacing any values
// it had. name must be in canonical form.
func (s *HeaderSlots) SetBytes(h http.Header, name string, value []byte) {
	if len(value) == 0 || len(value) > len(s.buf)-int(s.nb) {
		s.Set(h, name, string(value))
		return
	}
	b := s.buf[s.nb : int(s.nb)+len(value)]
	s.nb += uint8(len(value))
	copy(b, value)
	// The bytes of b are never written again: s only appends to buf, and
	// is never reset (see HeaderSlots), so the string is immutable, as
	// strings.Builder's are.
	s.Set(h, name, unsafe.String(&b[0], len(b)))
}
