package grpclimit_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
)

const (
	policy2 = `"per-minute";q=2;w=60`
)

// step is one RPC of a sequence and what the client must see of it.
type step struct {
	name   string
	code   codes.Code
	limit  string        // the ratelimit metadata
	retry  string        // the retry-after metadata
	delay  time.Duration // the RetryInfo delay; 0 for none
	quotas []string      // the quota IDs of the QuotaFailure detail
}

// check checks r against s: the status code, the metadata (as header
// metadata, once each) and the details.
func (s step) check(t *testing.T, r reply) {
	t.Helper()
	if r.code() != s.code {
		t.Fatalf("code %v (%v), want %v", r.code(), r.err, s.code)
	}
	if got := r.header.Get("ratelimit-policy"); !slices.Equal(got, []string{policy2}) {
		t.Errorf("header ratelimit-policy = %q, want [%q]", got, policy2)
	}
	if got := r.header.Get("ratelimit"); !slices.Equal(got, []string{s.limit}) {
		t.Errorf("header ratelimit = %q, want [%q]", got, s.limit)
	}
	if got := r.get(t, "retry-after"); got != s.retry {
		t.Errorf("retry-after = %q, want %q", got, s.retry)
	}
	ri := retryInfo(r.err)
	switch {
	case s.delay == 0 && ri != nil:
		t.Errorf("RetryInfo %v, want none", ri)
	case s.delay != 0 && ri == nil:
		t.Errorf("no RetryInfo, want a delay of %v", s.delay)
	case s.delay != 0 && ri.GetRetryDelay().AsDuration() != s.delay:
		t.Errorf("RetryInfo delay %v, want %v", ri.GetRetryDelay().AsDuration(), s.delay)
	}
	if got := quotaIDs(r.err); !slices.Equal(got, s.quotas) {
		t.Errorf("QuotaFailure quota IDs %q, want %q", got, s.quotas)
	}
}

// allowedThenDenied is what 3 RPCs see under a limit of 2 per minute.
var allowedThenDenied = []step{
	{name: "the first passes with one unit left", code: codes.OK, limit: `"per-minute";r=1;t=60`},
	{name: "the second passes with none left", code: codes.OK, limit: `"per-minute";r=0;t=60`},
	{name: "the third is denied until the window ends", code: codes.ResourceExhausted, limit: `"per-minute";r=0;t=60`, retry: "60", delay: time.Minute, quotas: []string{"per-minute"}},
}

func TestUnaryAllowedThenDenied(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(2, "per-minute"))
	svc := &service{}
	c := unaryServer(t, svc, grpclimit.UnaryServerInterceptor(lim))
	for _, s := range allowedThenDenied {
		t.Run(s.name, func(t *testing.T) {
			s.check(t, callUnary(t, c, 0))
		})
	}
	if n := svc.calls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2: a denied RPC never reaches it", n)
	}
	if n := remaining(t, lim, client); n != 0 {
		t.Errorf("remaining for %s = %d, want 0", client, n)
	}
}

func TestStreamAllowedThenDenied(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(2, "per-minute"))
	svc := &service{}
	c := streamServer(t, svc, grpclimit.StreamServerInterceptor(lim))
	for _, s := range allowedThenDenied {
		t.Run(s.name, func(t *testing.T) {
			r := callStream(t, c, []int32{10, 10, 10}) // three messages, one decision
			s.check(t, r)
			if want := map[bool]int{true: 30, false: 0}[s.code == codes.OK]; r.bytes != want {
				t.Errorf("received %d payload bytes, want %d", r.bytes, want)
			}
		})
	}
	if n := svc.calls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
}

func TestACostAboveCapacityIsDeniedWithoutRetryInfo(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(2, "per-minute"))
	svc := &service{}
	c := serve(t, client, svc,
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, grpclimit.WithCost(5))),
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim, grpclimit.WithCost(5))))
	for name, r := range map[string]reply{
		"a unary RPC": callUnary(t, c, 0),
		"a stream":    callStream(t, c, []int32{1}),
	} {
		t.Run(name, func(t *testing.T) {
			if r.code() != codes.ResourceExhausted {
				t.Fatalf("code %v (%v), want ResourceExhausted", r.code(), r.err)
			}
			if ri := retryInfo(r.err); ri != nil {
				t.Errorf("RetryInfo %v: a cost above capacity can never pass, so no delay may be promised", ri)
			}
			if ra := r.md("retry-after"); len(ra) != 0 {
				t.Errorf("retry-after %q, want none", ra)
			}
			if rl := r.md("ratelimit"); len(rl) != 0 {
				t.Errorf("ratelimit %q, want no item for a policy the cost can never pass", rl)
			}
			if got := r.header.Get("ratelimit-policy"); !slices.Equal(got, []string{policy2}) {
				t.Errorf("ratelimit-policy = %q, want [%q]", got, policy2)
			}
			if msg := r.err.Error(); !strings.Contains(msg, "costs 5 units") || !strings.Contains(msg, "at most 2") {
				t.Errorf("message %q, want the cost and the capacity", msg)
			}
			if got := quotaIDs(r.err); !slices.Equal(got, []string{"per-minute"}) {
				t.Errorf("QuotaFailure quota IDs %q, want [per-minute]", got)
			}
		})
	}
	if n := svc.calls.Load(); n != 0 {
		t.Errorf("the handler ran %d times, want 0", n)
	}
}

func TestLegacyResetOnTheInterceptorsClock(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(2, "per-minute"))
	c := unaryServer(t, &service{}, grpclimit.UnaryServerInterceptor(lim, grpclimit.WithHeaders(guard.HeadersLegacy),
		grpclimit.WithLegacyReset(guard.ResetUnix), grpclimit.WithClock(guardtest.NewClock(guardtest.Epoch))))
	want := fmt.Sprint(guardtest.Epoch.Unix() + 60) // the fixed window ends a minute after the epoch
	if got := callUnary(t, c, 0).get(t, "x-ratelimit-reset"); got != want {
		t.Errorf("metadata x-ratelimit-reset = %q, want %s", got, want)
	}
}

func TestWithHeadersSelectsTheMetadata(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(2, "per-minute"))
	c := unaryServer(t, &service{}, grpclimit.UnaryServerInterceptor(lim, grpclimit.WithHeaders(guard.HeadersDraft06)))
	r := callUnary(t, c, 0)
	for k, want := range map[string]string{
		"ratelimit-limit":     "2",
		"ratelimit-remaining": "1",
		"ratelimit-reset":     "60",
		"ratelimit-policy":    "2;w=60",
		"ratelimit":           "",
	} {
		if got := r.get(t, k); got != want {
			t.Errorf("metadata %s = %q, want %q", k, got, want)
		}
	}
}
