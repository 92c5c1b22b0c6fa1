package grpclimit_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

func TestHTTPStatus(t *testing.T) {
	for _, c := range []struct {
		code   codes.Code
		status int
		refund bool // WithRefundOn(guard.ServerErrors) refunds it
	}{
		{codes.OK, 200, false},
		{codes.Canceled, 499, false},
		{codes.Unknown, 500, true},
		{codes.InvalidArgument, 400, false},
		{codes.DeadlineExceeded, 504, true},
		{codes.NotFound, 404, false},
		{codes.AlreadyExists, 409, false},
		{codes.PermissionDenied, 403, false},
		{codes.ResourceExhausted, 429, false},
		{codes.FailedPrecondition, 400, false},
		{codes.Aborted, 409, false},
		{codes.OutOfRange, 400, false},
		{codes.Unimplemented, 501, true},
		{codes.Internal, 500, true},
		{codes.Unavailable, 503, true},
		{codes.DataLoss, 500, true},
		{codes.Unauthenticated, 401, false},
		{codes.Code(99), 500, true},
	} {
		t.Run(c.code.String()+" is "+fmt.Sprint(c.status), func(t *testing.T) {
			s := grpclimit.HTTPStatus(c.code)
			if s != c.status {
				t.Errorf("HTTPStatus(%v) = %d, want %d", c.code, s, c.status)
			}
			if guard.ServerErrors(s) != c.refund {
				t.Errorf("ServerErrors(HTTPStatus(%v)) = %v, want %v", c.code, !c.refund, c.refund)
			}
		})
	}
}

// secret is the text of an error behind the guard's sentinels, which no
// status may carry.
const secret = "dial tcp 10.0.0.7:6379: secret"

func TestErrorStatus(t *testing.T) {
	cause := errors.New(secret)
	for _, c := range []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"a missing metadata key names it", fmt.Errorf("%w: %w", guard.ErrKey, &keyfuncs.SourceError{Kind: "header", Name: "X-Api-Key", Err: keyfuncs.ErrNoKey}),
			codes.InvalidArgument, "missing header X-Api-Key"},
		{"a key too long says so", fmt.Errorf("%w: %w", guard.ErrKey, &keyfuncs.SourceError{Kind: "header", Name: "X-Api-Key", Err: keyfuncs.ErrKeyTooLong}),
			codes.InvalidArgument, "header X-Api-Key is longer than 1024 bytes"},
		{"a key function that fails says nothing of why", fmt.Errorf("%w: %w", guard.ErrKey, fmt.Errorf("%w: %w", keyfuncs.ErrNoKey, cause)),
			codes.InvalidArgument, "missing rate-limit key"},
		{"a cost function's error is a generic invalid argument", fmt.Errorf("%w: %w", guard.ErrCost, cause),
			codes.InvalidArgument, "invalid rate-limit key or cost"},
		{"a peer address that is not one is internal", fmt.Errorf("%w: %w", guard.ErrKey, fmt.Errorf("%w: %w", keyfuncs.ErrBadAddress, cause)),
			codes.Internal, "internal error"},
		{"a failing store under FailClosed is unavailable", fmt.Errorf("%w: %w", guard.ErrLimiter, fmt.Errorf("%w: %w", core.ErrUnavailable, cause)),
			codes.Unavailable, "rate limiter unavailable"},
		{"a hanging store is unavailable", fmt.Errorf("%w: %w", guard.ErrLimiter, cause),
			codes.Unavailable, "rate limiter unavailable"},
		{"an invalid limit is internal", fmt.Errorf("%w: %w", guard.ErrLimiter, fmt.Errorf("%w: %w", core.ErrInvalidLimit, cause)),
			codes.Internal, "internal error"},
		{"a negative cost is internal", fmt.Errorf("%w: %w", guard.ErrCost, core.ErrInvalidCost),
			codes.Internal, "internal error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := grpclimit.ErrorStatus(c.err)
			if st.Code() != c.code || st.Message() != c.msg {
				t.Errorf("ErrorStatus = %v %q, want %v %q", st.Code(), st.Message(), c.code, c.msg)
			}
			if strings.Contains(fmt.Sprint(st.Proto()), "secret") {
				t.Errorf("the status carries the error's text: %v", st.Proto())
			}
		})
	}
}

func TestDeniedStatus(t *testing.T) {
	for _, c := range []struct {
		name   string
		d      guard.Denial
		msg    string
		delay  time.Duration // the RetryInfo delay; 0 for none
		quotas []string
	}{
		{
			name:   "a denial promises its retry delay",
			d:      guard.Denial{Key: "secret-key", Cost: 1, RetryAfter: 17 * time.Second, Policies: []string{"per-minute", "per-hour"}},
			msg:    "rate limit exceeded: retry after 17 seconds",
			delay:  17 * time.Second,
			quotas: []string{"per-minute", "per-hour"},
		},
		{
			name:   "a denial of one second says so",
			d:      guard.Denial{Key: "secret-key", Cost: 1, RetryAfter: time.Second, Policies: []string{"per-second"}},
			msg:    "rate limit exceeded: retry after 1 second",
			delay:  time.Second,
			quotas: []string{"per-second"},
		},
		{
			name: "a cost above capacity promises nothing, in its unit",
			d: guard.Denial{Key: "secret-key", Cost: 10, Capacity: 5, Policies: []string{"tokens"},
				Decision: core.Decision{Limit: core.PerMinute(5).WithUnit("tokens")}},
			msg:    "rate limit exceeded: the request costs 10 tokens; the policy admits at most 5 in one request, so it can never pass",
			quotas: []string{"tokens"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := grpclimit.DeniedStatus(&c.d)
			err := st.Err()
			if st.Code() != codes.ResourceExhausted || st.Message() != c.msg {
				t.Errorf("DeniedStatus = %v %q, want ResourceExhausted %q", st.Code(), st.Message(), c.msg)
			}
			ri := retryInfo(err)
			switch {
			case c.delay == 0 && ri != nil:
				t.Errorf("RetryInfo %v, want none", ri)
			case c.delay != 0 && ri.GetRetryDelay().AsDuration() != c.delay:
				t.Errorf("RetryInfo %v, want a delay of %v", ri, c.delay)
			}
			if got := quotaIDs(err); !slices.Equal(got, c.quotas) {
				t.Errorf("QuotaFailure quota IDs %q, want %q", got, c.quotas)
			}
			if strings.Contains(fmt.Sprint(st.Proto()), "secret-key") {
				t.Errorf("the status carries the key: %v", st.Proto())
			}
		})
	}
}
