package keyfuncs

import (
	"errors"
	"strconv"
)

// Errors returned by the key functions of this package. They are matched
// with errors.Is; the functions wrap them with the header, query parameter
// or option concerned. Their text is meant for logs and must never be sent
// to an HTTP client.
var (
	// ErrNoKey reports that a request carries nothing to derive a key from:
	// a missing or empty header, query parameter, route or context value.
	ErrNoKey = errors.New("keyfuncs: no key")

	// ErrKeyTooLong reports that the value a key would be built from is
	// longer than MaxKeyLen bytes. The key function refuses it rather than
	// return an unbounded, client-chosen key.
	ErrKeyTooLong = errors.New("keyfuncs: key too long")

	// ErrBadAddress reports that the remote (peer) address of a request is
	// no IP address, with or without a port: it is empty, does not parse,
	// or is a Unix socket's peer, untrusted (see TrustUnixSocket) or whose
	// forwarding header names no client. The server, not the client, made
	// it so.
	ErrBadAddress = errors.New("keyfuncs: bad remote address")

	// ErrInvalidOption reports an invalid option passed to NewIP or
	// TrustProxyCIDRs: a prefix length out of range, an empty header name,
	// an invalid trusted prefix or CIDR.
	ErrInvalidOption = errors.New("keyfuncs: invalid option")
)

// A SourceError reports that the part of a request a key is read from (a
// header, a query parameter, the route, the method, the path) is missing,
// empty, or longer than MaxKeyLen. It wraps ErrNoKey or ErrKeyTooLong, and
// is what Header, Query, Route, Method and Path return. It names the part,
// which the server configured, and never holds the value the client sent:
// adapters may tell the client what was missing (see guard.ErrorDetail).
type SourceError struct {
	// Kind is the part of the request: "header", "query parameter",
	// "route", "method" or "path".
	Kind string
	// Name is the header's canonical name or the query parameter's name;
	// "" for the other kinds.
	Name string
	// Err is ErrNoKey (missing or empty) or ErrKeyTooLong.
	Err error
}

// Error returns e.g. `keyfuncs: no key: header "X-Api-Key" is missing or
// empty`.
func (e *SourceError) Error() string {
	what := e.Kind
	if e.Name != "" {
		what += " " + strconv.Quote(e.Name)
	}
	if errors.Is(e.Err, ErrKeyTooLong) {
		return e.Err.Error() + ": " + what + " is longer than " + strconv.Itoa(MaxKeyLen) + " bytes"
	}
	return e.Err.Error() + ": " + what + " is missing or empty"
}

// Unwrap returns Err.
func (e *SourceError) Unwrap() error { return e.Err }
