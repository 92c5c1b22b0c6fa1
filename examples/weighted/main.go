// Command weighted charges each request what it costs the server: an
// export of N pages costs N units of a 100-pages-per-minute limit per
// client, computed from the request before it runs.
//
//	go run ./weighted                           # listens on 127.0.0.1:8080 (-addr, or env ADDR)
//	curl -i 'localhost:8080/export?pages=30'    # RateLimit: "pages";r=70;t=...
//	curl -i 'localhost:8080/export?pages=500'   # 429: more than the limit can ever hold
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/nethttp"
)

// pages reads the pages query parameter: 1 by default.
func pages(r *http.Request) (int64, error) {
	s := r.URL.Query().Get("pages")
	if s == "" {
		return 1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > 10_000 {
		return 0, errors.New("pages: want a number from 1 to 10000")
	}
	return n, nil
}

// newApp returns the application's handler and a function that releases
// its store.
func newApp() (http.Handler, func(), error) {
	store := memstore.New()
	lim, err := core.New(store, core.PerMinute(100).Named("pages"))
	if err != nil {
		return nil, nil, err
	}
	export := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := pages(r) // already checked by the cost function
		fmt.Fprintf(w, "exported %d pages\n", n)
	})

	mux := http.NewServeMux()
	// The cost is computed per request, before the decision. A cost
	// function's error answers 400 (the request is malformed) with a
	// generic problem+json body; its text goes to WithOnError, never to
	// the client. A cost above the limit's capacity (here 100) can never
	// pass: 429 without Retry-After, and a problem type that says so
	// (request-exceeds-capacity, with the cost and the capacity).
	mux.Handle("GET /export", nethttp.New(lim,
		nethttp.WithCostFunc(pages),
		nethttp.WithOnError(func(r *http.Request, err error) { log.Printf("%s %s: %v", r.Method, r.URL, err) }),
	)(export))
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello, unlimited")
	})
	return mux, func() { store.Close() }, nil
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
