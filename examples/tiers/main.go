// Command tiers limits each account by its plan: free accounts get 10
// requests per second and 100 per minute, pro accounts 100 per second and
// 5000 per minute. One Limiter serves every plan: core.WithLimitsFunc picks
// the limits per request. Clients authenticate with an API key in the
// Authorization header; the limit is keyed by the account behind it.
//
//	go run ./tiers                              # listens on 127.0.0.1:8080 (-addr, or env ADDR)
//	curl -i -H 'Authorization: Bearer free-key' localhost:8080/hello
//	curl -i -H 'Authorization: Bearer pro-key' localhost:8080/hello
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/nethttp"
)

// An account is who a request is charged to.
type account struct {
	ID   string
	Plan string
}

// accounts maps API keys to accounts. A real service looks keys up in its
// database, and stores only their hashes.
var accounts = map[string]account{
	"free-key": {ID: "acct-1", Plan: "free"},
	"pro-key":  {ID: "acct-2", Plan: "pro"},
}

// plans are the limits of each plan. Name them: the names are the policy
// names of the RateLimit headers. When an account changes plan, its usage
// carries over (same algorithm and periods, new quotas).
var plans = map[string][]core.Limit{
	"free": {core.PerSecond(10).Named("free-per-second"), core.PerMinute(100).Named("free-per-minute")},
	"pro":  {core.PerSecond(100).Named("pro-per-second"), core.PerMinute(5000).Named("pro-per-minute")},
}

type accountKey struct{}

// accountFrom returns the account the auth middleware stored in ctx.
func accountFrom(ctx context.Context) (account, bool) {
	a, ok := ctx.Value(accountKey{}).(account)
	return a, ok
}

// authenticate resolves the API key of "Authorization: Bearer <key>" to
// an account, or answers 401. It runs before the limiter, so that the
// limiter keys on a verified account, never on a value the client made up.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		acct, known := accounts[key]
		if !ok || !known {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unknown API key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, acct)))
	})
}

// newApp returns the application's handler and a function that releases
// its store.
func newApp() (http.Handler, func(), error) {
	store := memstore.New()
	lim, err := core.New(store,
		// The limits of the request's account, from its plan. The function
		// receives the request's context, where authenticate put the
		// account. The Limiter's own limits (below) apply when it returns
		// none.
		core.WithLimitsFunc(func(ctx context.Context, key string) []core.Limit {
			acct, _ := accountFrom(ctx)
			return plans[acct.Plan]
		}),
		plans["free"][0], plans["free"][1],
	)
	if err != nil {
		return nil, nil, err
	}
	// Key by account ID, so that all of an account's keys share its quota.
	byAccount := func(r *http.Request) (string, error) {
		acct, _ := accountFrom(r.Context())
		return acct.ID, nil // "" (no account) fails the request: never unlimited
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		acct, _ := accountFrom(r.Context())
		fmt.Fprintf(w, "hello, %s (%s plan)\n", acct.ID, acct.Plan)
	})
	return authenticate(nethttp.New(lim, nethttp.WithKeyFunc(byAccount))(mux)), func() { store.Close() }, nil
}

func main() {
	addr := flag.String("addr", envOr("ADDR", "127.0.0.1:8080"), "listen address (env ADDR)")
	selftest := flag.Bool("selftest", false, "serve on a free loopback port, send a few requests, check the answers and exit")
	flag.Parse()
	if *selftest {
		if err := selfTest(); err != nil {
			log.Fatalf("selftest: %v", err)
		}
		fmt.Println("selftest: ok")
		return
	}

	h, closeStore, err := newApp()
	if err != nil {
		log.Fatal(err)
	}
	defer closeStore()
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("listening on http://%s", *addr)
	if err := srv.ListenAndServe(); err != nil {
		log.Print(err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
