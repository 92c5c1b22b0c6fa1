// Command rulesfile is a server whose limits come entirely from a rules
// file (rules.yaml beside this file): a limit per client address, a
// costly search, an API limited per key by plan, an unlimited health
// check. Edit the file while the server runs: it reloads on SIGHUP and
// when the file changes, keeping every client's usage, and a file with a
// mistake is reported and leaves the running rules in place.
//
//	go run ./rulesfile -rules rulesfile/rules.yaml   # listens on 127.0.0.1:8080 (-addr, or env ADDR)
//	curl -i localhost:8080/hello
//	curl -i -X POST localhost:8080/search             # costs 5 of 10 per hour
//	curl -i -H 'X-API-Key: pro_k1' localhost:8080/api/items
//	kill -HUP <pid>                                   # reload now
//
// Without -rules it serves the rules.yaml built into it, and cannot reload.
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/rules"
)

//go:embed rules.yaml
var builtin []byte

// newApp returns the application's handler, limited by the rules of the
// file at path (the built-in ones when path is ""), the running rules and
// a function that releases them.
func newApp(path string) (http.Handler, *rules.Set, func(), error) {
	store := memstore.New()
	var set *rules.Set
	var err error
	if path == "" {
		var cfg *rules.Config
		if cfg, err = rules.Parse("rules.yaml", builtin); err == nil {
			set, err = rules.New(store, cfg)
		}
	} else {
		set, err = rules.Open(store, path)
	}
	if err != nil {
		store.Close()
		return nil, nil, nil, err // says file, line and field
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})
	mux.HandleFunc("POST /search", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "results")
	})
	mux.HandleFunc("GET /api/items", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `["a", "b"]`)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	return set.Middleware(mux), set, func() { set.Close(); store.Close() }, nil
}

func main() {
	addr := flag.String("addr", envOr("ADDR", "127.0.0.1:8080"), "listen address (env ADDR)")
	path := flag.String("rules", "", "rules file to serve and reload; default: the built-in rules.yaml")
	selftest := flag.Bool("selftest", false, "serve on a free loopback port, send a few requests, check the answers and exit")
	flag.Parse()
	if *selftest {
		if err := selfTest(); err != nil {
			log.Fatalf("selftest: %v", err)
		}
		fmt.Println("selftest: ok")
		return
	}

	h, set, closeApp, err := newApp(*path)
	if err != nil {
		log.Fatal(err)
	}
	defer closeApp()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *path != "" {
		// Reload on SIGHUP, and when the file changes. Each reload is
		// logged through log/slog; a bad file leaves the running rules.
		if err := set.ReloadOn(ctx, syscall.SIGHUP); err != nil {
			log.Fatal(err)
		}
		if err := set.Watch(ctx, 2*time.Second); err != nil {
			log.Fatal(err)
		}
	}
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	log.Printf("listening on http://%s", *addr)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Print(err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
