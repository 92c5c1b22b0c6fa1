package grpclimit

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tollgate/tollgate/guard"
)

// DeniedStatus returns the status a denied RPC ends with, by default:
// codes.ResourceExhausted, with the details
//
//   - google.rpc.RetryInfo, its retry_delay d.RetryAfter: the time until
//     the denied cost could pass, in whole seconds, the Retry-After of the
//     HTTP adapters (and of the retry-after metadata);
//   - google.rpc.QuotaFailure, one violation per violated policy, its
//     quota_id the policy's name as the ratelimit metadata names it.
//
// A cost above a limit's capacity (d.Capacity) can never pass: its status
// has no RetryInfo, since any delay would promise a success that will not
// come, and its message and violation say so, with the cost and the
// capacity. The message never holds the key.
//
// An RPC the adaptive limit shed (d.Overloaded) ends with
// codes.Unavailable and a RetryInfo: the server is overloaded, which is
// transient and no fault of the client's, and gRPC's conventions keep
// ResourceExhausted for a quota the caller exhausted; Unavailable is also
// the code gRPC's retry policies and load balancers treat as "try again,
// maybe on another backend", which is what shedding asks of the client.
func DeniedStatus(d *guard.Denial) *status.Status {
	if d.Overloaded {
		secs := int64(d.RetryAfter.Seconds())
		msg := "server overloaded: retry after " + strconv.FormatInt(secs, 10) + " second"
		if secs != 1 {
			msg += "s"
		}
		st := status.New(codes.Unavailable, msg)
		if withDetails, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}); err == nil {
			st = withDetails
		}
		return st
	}
	var msg, what string
	var details []protoadapt.MessageV1
	if d.Capacity > 0 {
		unit := "units"
		if u := d.Decision.Limit.Unit; u != "" {
			unit = u
		}
		what = "the request costs " + strconv.FormatInt(d.Cost, 10) + " " + unit +
			"; the policy admits at most " + strconv.FormatInt(d.Capacity, 10) + " in one request, so it can never pass"
		msg = "rate limit exceeded: " + what
	} else {
		secs := int64(d.RetryAfter.Seconds())
		msg = "rate limit exceeded: retry after " + strconv.FormatInt(secs, 10) + " second"
		if secs != 1 {
			msg += "s"
		}
		what = "quota exceeded"
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)})
	}
	qf := &errdetails.QuotaFailure{}
	for _, p := range d.Policies {
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{QuotaId: p, Description: what})
	}
	details = append(details, qf)
	st := status.New(codes.ResourceExhausted, msg)
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st
}

// ErrorStatus returns the status an RPC that cannot be decided ends with,
// by default; err is what a guard.ErrorHandler receives. The code follows
// the HTTP status guard.ErrorStatus chooses, and the message is generic:
// it never holds err's text (a store's address, a key function's error),
// only what the client may be told to fix its call (guard.ErrorDetail):
//
//   - a key the RPC lacks (400): codes.InvalidArgument, "missing header
//     X-Api-Key" (the metadata key x-api-key), or "missing rate-limit
//     key" when the key function does not say what;
//   - a failing store under core.FailClosed, an open circuit breaker, a
//     hanging store (503): codes.Unavailable, "rate limiter unavailable";
//   - a configuration error (500): codes.Internal, "internal error".
//
// A LeakyBucket wait or a store call cut short by the RPC's own context
// ending (the client cancelled, its deadline passed) ends with
// codes.Canceled or codes.DeadlineExceeded; see the default error handler.
func ErrorStatus(err error) *status.Status {
	switch s := guard.ErrorStatus(err); {
	case s >= 400 && s < 500:
		msg := guard.ErrorDetail(err)
		if msg == "" {
			msg = "invalid rate-limit key or cost"
		}
		return status.New(codeOf(s), msg)
	case s == http.StatusServiceUnavailable:
		return status.New(codes.Unavailable, "rate limiter unavailable")
	default:
		return status.New(codeOf(s), "internal error")
	}
}

// defaultErrorStatus is the default error handler's status: the RPC's
// own end when its context ended, else ErrorStatus.
func defaultErrorStatus(ctx context.Context, err error) *status.Status {
	if cerr := ctx.Err(); cerr != nil && (errors.Is(err, guard.ErrWait) || errors.Is(err, guard.ErrLimiter)) {
		return status.FromContextError(cerr)
	}
	return ErrorStatus(err)
}

// HTTPStatus returns the HTTP status of code, as google/rpc/code.proto
// maps each code (OK 200, InvalidArgument 400, ResourceExhausted 429,
// Canceled 499, Unknown and Internal 500, Unavailable 503,
// DeadlineExceeded 504, ...): the guard.Result.Status that WithRefundOn
// and WithResponseCost see for an RPC that ended with code. So
// WithRefundOn(guard.ServerErrors) refunds RPCs that end with Unknown,
// Internal, DataLoss, Unimplemented, Unavailable or DeadlineExceeded.
func HTTPStatus(code codes.Code) int {
	switch code {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499 // Client Closed Request
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	default: // Unknown, Internal, DataLoss, and codes not defined yet
		return http.StatusInternalServerError
	}
}

// codeOf returns the code of an HTTP status, for a response written with
// guard.Writer.WriteResponse (by a guard.DeniedHandler or
// guard.ErrorHandler that writes HTTP statuses): a code HTTPStatus maps
// to it (Internal for 500, Aborted for 409), FailedPrecondition for
// another 4xx, Unknown for anything else.
func codeOf(s int) codes.Code {
	switch s {
	case http.StatusOK:
		return codes.OK
	case 499:
		return codes.Canceled
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		return codes.Aborted
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	case http.StatusInternalServerError:
		return codes.Internal
	}
	switch {
	case s >= 400 && s < 500:
		return codes.FailedPrecondition
	default:
		return codes.Unknown
	}
}

// codeOfError returns the code an RPC whose handler returned err ends
// with, as the server sends it: a status error's code, a context error's
// (Canceled, DeadlineExceeded), Unknown for any other error.
func codeOfError(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	return status.FromContextError(err).Code()
}
