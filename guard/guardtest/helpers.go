package guardtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

// NewLimiter returns a Limiter of limits over st — when st is nil, a fresh
// memstore that does not sweep, closed with t — on a clock fixed at Epoch.
// It fails t on an invalid limit.
func NewLimiter(t testing.TB, st core.Store, limits ...core.Limit) *core.Limiter {
	t.Helper()
	clock := NewClock(Epoch)
	if st == nil {
		ms := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
		t.Cleanup(func() { ms.Close() })
		st = ms
	}
	opts := []core.Option{core.WithClock(clock)}
	for _, l := range limits {
		opts = append(opts, l)
	}
	lim, err := core.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// Requests returns n GET requests for path from n distinct client
// addresses (10.x.y.z), for benchmarks over many clients.
func Requests(n int, path string) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
		reqs[i] = r
	}
	return reqs
}
