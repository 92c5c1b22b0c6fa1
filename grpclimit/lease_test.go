package grpclimit_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard/guardtest"
)

// With leases on (package lease), the interceptors answer as they do
// without: the same codes, metadata and details, RPC by RPC, while the
// decisions are made in process from the slices the lease store holds.
func TestLeasedInterceptorsAnswerAsWithout(t *testing.T) {
	const quota = 12
	policy := fmt.Sprintf(`"per-minute";q=%d;w=60`, quota)
	for _, kind := range []string{"unary", "stream"} {
		t.Run(kind, func(t *testing.T) {
			clock := guardtest.NewClock(guardtest.Epoch)
			ms := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
			t.Cleanup(func() { ms.Close() })
			ls, err := lease.New(ms, lease.WithMinSlice(4), lease.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ls.Close() })
			lim := guardtest.NewLimiter(t, ls, perMinute(quota, "per-minute"))
			svc := &service{}
			var call func() reply
			if kind == "stream" {
				c := streamServer(t, svc, grpclimit.StreamServerInterceptor(lim))
				call = func() reply { return callStream(t, c, []int32{10}) }
			} else {
				c := unaryServer(t, svc, grpclimit.UnaryServerInterceptor(lim))
				call = func() reply { return callUnary(t, c, 0) }
			}
			for i := range quota + 2 {
				r := call()
				left := max(quota-1-i, 0)
				want := step{name: fmt.Sprint("RPC ", i+1), code: codes.OK, limit: fmt.Sprintf(`"per-minute";r=%d;t=60`, left)}
				if i >= quota {
					want.code, want.retry, want.delay, want.quotas = codes.ResourceExhausted, "60", time.Minute, []string{"per-minute"}
				}
				if r.code() != want.code {
					t.Fatalf("%s: code %v (%v), want %v", want.name, r.code(), r.err, want.code)
				}
				if got := r.header.Get("ratelimit-policy"); !slices.Equal(got, []string{policy}) {
					t.Errorf("%s: ratelimit-policy = %q, want [%q]", want.name, got, policy)
				}
				if got := r.header.Get("ratelimit"); !slices.Equal(got, []string{want.limit}) {
					t.Errorf("%s: ratelimit = %q, want [%q]", want.name, got, want.limit)
				}
				if got := r.get(t, "retry-after"); got != want.retry {
					t.Errorf("%s: retry-after = %q, want %q", want.name, got, want.retry)
				}
				if ri := retryInfo(r.err); (ri == nil) != (want.delay == 0) || ri != nil && ri.GetRetryDelay().AsDuration() != want.delay {
					t.Errorf("%s: RetryInfo %v, want a delay of %v", want.name, ri, want.delay)
				}
				if got := quotaIDs(r.err); !slices.Equal(got, want.quotas) {
					t.Errorf("%s: QuotaFailure quota IDs %q, want %q", want.name, got, want.quotas)
				}
			}
			if n := svc.calls.Load(); n != quota {
				t.Errorf("the handler ran %d times, want %d", n, quota)
			}
			if s := ls.Stats(); s.Local == 0 {
				t.Errorf("lease stats %+v: no RPC was decided in process", s)
			}
			// The shared store was charged for every admission.
			plain, err := core.New(ms, core.WithClock(clock), perMinute(quota, "per-minute"))
			if err != nil {
				t.Fatal(err)
			}
			if n := remaining(t, plain, client); n != 0 {
				t.Errorf("the shared store shows %d left for %s, want 0", n, client)
			}
		})
	}
}
