package keyfuncs

import "errors"

// Errors returned by the key functions of this package. They are matched
// with errors.Is; the functions wrap them with the header, query parameter
// or option concerned. Their text is meant for logs and must never be sent
// to an HTTP client.
var (
	// ErrNoKey reports that a request carries nothing to derive a key from:
	// a missing or empty header, query parameter, route, context value or
	// remote address.
	ErrNoKey = errors.New("keyfuncs: no key")

	// ErrKeyTooLong reports that the value a key would be built from is
	// longer than MaxKeyLen bytes. The key function refuses it rather than
	// return an unbounded, client-chosen key.
	ErrKeyTooLong = errors.New("keyfuncs: key too long")

	// ErrBadAddress reports that the remote (peer) address of a request
	// cannot be parsed as an IP address, with or without a port.
	ErrBadAddress = errors.New("keyfuncs: bad remote address")

	// ErrInvalidOption reports an invalid option passed to NewIP or
	// TrustProxyCIDRs: a prefix length out of range, an empty header name,
	// an invalid trusted prefix or CIDR.
	ErrInvalidOption = errors.New("keyfuncs: invalid option")
)
