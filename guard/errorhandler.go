package guard

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/keyfuncs"
)

// ErrorStatus returns the status DefaultErrorHandler answers err with:
//
//   - ErrKey: 400 Bad Request. The key is read from the request, and a
//     request that lacks it (a missing API-key header) or carries a value
//     out of bounds (keyfuncs.ErrKeyTooLong) is malformed for this
//     endpoint; it must not pass unlimited, or omitting the key would
//     escape the limit, and a 5xx would invite retries and count the
//     client's mistake against the server's error budget. Exception:
//     keyfuncs.ErrBadAddress, a peer address that is empty or no address
//     (a Unix socket's peer not trusted with keyfuncs.TrustUnixSocket),
//     which the server (its listener or a proxy protocol) produced: 500.
//   - ErrCost: 400 for the cost function's error (the cost is read from
//     the request); 500 for a negative cost, a programming error.
//   - ErrLimiter: 503 for core.ErrUnavailable (the store failed under
//     FailClosed, or the circuit breaker is open); 500 for invalid input (core.ErrInvalidLimit,
//     ErrInvalidOp, ErrInvalidCost, ErrInvalidKey: a limit from
//     WithLimitsFunc that does not validate is a configuration error);
//     503 Service Unavailable for everything else: a failing, hanging or
//     closed store, a cancelled context.
//   - ErrWait, and any other error: 503.
func ErrorStatus(err error) int {
	switch {
	case errors.Is(err, ErrKey):
		if errors.Is(err, keyfuncs.ErrBadAddress) {
			return http.StatusInternalServerError
		}
		return http.StatusBadRequest
	case errors.Is(err, ErrCost):
		if errors.Is(err, core.ErrInvalidCost) {
			return http.StatusInternalServerError
		}
		return http.StatusBadRequest
	case errors.Is(err, ErrLimiter):
		if errors.Is(err, core.ErrUnavailable) {
			return http.StatusServiceUnavailable
		}
		if errors.Is(err, core.ErrInvalidLimit) || errors.Is(err, core.ErrInvalidOp) ||
			errors.Is(err, core.ErrInvalidCost) || errors.Is(err, core.ErrInvalidKey) {
			return http.StatusInternalServerError
		}
		return http.StatusServiceUnavailable
	default:
		return http.StatusServiceUnavailable
	}
}

// DefaultErrorHandler answers with ErrorStatus(err) and a generic
// application/problem+json body, with a detail when ErrorDetail has one:
//
//	{"type":"about:blank","title":"Service Unavailable","status":503}
//	{"type":"about:blank","title":"Bad Request","status":400,"detail":"missing header X-API-Key"}
//
// It never sends err's text: use WithOnError to log it.
func DefaultErrorHandler(w Writer, _ keyfuncs.Request, err error) error {
	status := ErrorStatus(err)
	w.SetHeader(HeaderContentType, ContentTypeProblem)
	return w.WriteResponse(status, errorProblem(status, ErrorDetail(err)))
}

// ErrorDetail returns what a client may be told of err, an error of the
// Guard (see ErrorHandler), so that it can fix its request; "" when
// nothing. Only a key the request lacks has a detail: what it lacks, as
// the server configured it ("missing header X-API-Key", "header X-API-Key
// is longer than 1024 bytes", for a keyfuncs.SourceError), or, when the
// key function does not say, "missing rate-limit key" or "rate-limit key
// longer than 1024 bytes". It never holds a value the client sent, nor
// any text of err: a store's or a key function's errors are for logs.
func ErrorDetail(err error) string {
	if !errors.Is(err, ErrKey) {
		return ""
	}
	long := errors.Is(err, keyfuncs.ErrKeyTooLong)
	var se *keyfuncs.SourceError
	if errors.As(err, &se) && se.Kind != "" {
		what := se.Kind
		if se.Name != "" {
			what += " " + se.Name
		}
		if long {
			return what + " is longer than " + strconv.Itoa(keyfuncs.MaxKeyLen) + " bytes"
		}
		return "missing " + what
	}
	switch {
	case long:
		return "rate-limit key longer than " + strconv.Itoa(keyfuncs.MaxKeyLen) + " bytes"
	case errors.Is(err, keyfuncs.ErrNoKey):
		return "missing rate-limit key"
	}
	return ""
}

// errorProblem returns the generic problem body of status, with detail
// when it is not empty.
func errorProblem(status int, detail string) []byte {
	b := make([]byte, 0, 96)
	b = append(b, `{"type":"about:blank","title":`...)
	b = appendSFString(b, http.StatusText(status)) // printable ASCII: the same quoting as JSON
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	if detail != "" {
		b = append(b, `,"detail":`...)
		b = appendSFString(b, detail) // cleaned to printable ASCII, quoted as JSON quotes it
	}
	return append(b, '}')
}
