package guard_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// exampleWriter is the smallest guard.Writer: what an adapter implements over
// its framework's response.
type exampleWriter struct {
	headers map[string]string
	status  int
}

func (w *exampleWriter) SetHeader(name, value string) { w.headers[name] = value }
func (w *exampleWriter) WriteResponse(status int, body []byte) error {
	w.status = status
	return nil
}

// The flow an adapter runs for each request: Serve decides, sets the
// headers, and calls next only when the request may pass.
func Example() {
	store := memstore.New(memstore.WithClock(guardtest.NewClock(guardtest.Epoch)))
	defer store.Close()
	lim, _ := core.New(store, core.PerMinute(2).Named("per-minute"))
	g, _ := guard.New(lim, guard.WithKey(keyfuncs.Header("X-API-Key")))

	for i := 1; i <= 3; i++ {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", "alice")
		w := &exampleWriter{headers: map[string]string{}}
		passed := false
		g.Serve(keyfuncs.FromHTTP(r), w, func(ctx context.Context) guard.Result {
			passed = true
			return guard.Result{Status: 200}
		})
		var names []string
		for name, value := range w.headers {
			names = append(names, name+": "+value)
		}
		sort.Strings(names)
		fmt.Printf("request %d: passed %v, status %d\n  %s\n", i, passed, w.status, strings.Join(names, "\n  "))
	}
	// The clock stands at the start of a minute. t is the effective
	// window: with both units used now, one more passes once the previous
	// window's weight 2·(60−e)/60 is at most 1, at e = 30 s into the next
	// window, 90 s on. So t=90 with one unit left as with none, and the
	// third request's Retry-After is 90 too. (The window is fully
	// replenished only 120 s on, which t does not promise.)

	// Output:
	// request 1: passed true, status 0
	//   Ratelimit-Policy: "per-minute";q=2;w=60
	//   Ratelimit: "per-minute";r=1;t=90
	// request 2: passed true, status 0
	//   Ratelimit-Policy: "per-minute";q=2;w=60
	//   Ratelimit: "per-minute";r=0;t=90
	// request 3: passed false, status 429
	//   Content-Type: application/problem+json
	//   Ratelimit-Policy: "per-minute";q=2;w=60
	//   Ratelimit: "per-minute";r=0;t=90
	//   Retry-After: 90
}
