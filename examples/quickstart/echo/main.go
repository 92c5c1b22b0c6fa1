// Command echo is the echo quickstart: an app-wide limit per client IP, and
// a costly route that charges 5 units of a limiter of its own.
//
//	go run ./quickstart/echo                    # listens on 127.0.0.1:8080 (-addr, or env ADDR)
//	curl -i localhost:8080/hello
//	curl -i -X POST localhost:8080/search       # the 5th search in a minute gets a 429
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/echolimit"
)

// newApp returns the application's echo instance and a function that
// releases its stores.
func newApp() (*echo.Echo, func(), error) {
	// The app-wide limits: 10 requests per second and 100 per minute, per
	// client, both at once.
	store := memstore.New()
	lim, err := core.New(store, core.PerSecond(10), core.PerMinute(100))
	if err != nil {
		return nil, nil, err
	}
	// The costly route's own limit, on the same store: 20 units per minute,
	// and a search costs 5. Limiters keep separate state for the same key
	// (both key by client IP) unless they are configured alike or share a name.
	searchLim, err := core.New(store, core.PerMinute(20).Named("search"))
	if err != nil {
		return nil, nil, err
	}
	closeStores := func() { store.Close() }

	e := echo.New()
	e.HideBanner = true
	// App-wide, keyed by client IP: the peer address (echo's RealIP, which
	// reads forwarding headers, is not used). Behind a proxy, trust it to
	// read X-Forwarded-For (only when the peer is a trusted proxy):
	//
	//	e.Use(echolimit.New(lim, echolimit.WithKey(keyfuncs.IP(
	//		keyfuncs.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))))))
	e.Use(echolimit.New(lim))
	e.GET("/hello", func(c echo.Context) error {
		return c.String(http.StatusOK, "hello\n")
	})
	// Per route: route middleware goes after the handler.
	e.POST("/search", func(c echo.Context) error {
		return c.String(http.StatusOK, "results\n")
	}, echolimit.New(searchLim, echolimit.WithCost(5)))
	return e, closeStores, nil
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

	e, closeStores, err := newApp()
	if err != nil {
		log.Fatal(err)
	}
	defer closeStores()
	srv := &http.Server{Addr: *addr, Handler: e, ReadHeaderTimeout: 10 * time.Second}
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
