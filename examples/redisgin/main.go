// Command redisgin is the gin quickstart on Redis, so that every instance
// of the service shares one quota per client: 10 requests per second and
// 100 per minute app-wide, and a search route of cost 5 under 20 per
// minute of its own.
//
// While Redis is down, the app-wide limiter decides on an in-memory store,
// on a quarter of each limit (core.FleetSize(4): four instances together
// then admit at most the limit), and the search route answers 503 rather
// than run unlimited. Store failures are logged through log/slog.
//
//	go run ./redisgin                           # Redis at 127.0.0.1:6379 (-redis, or env TOLLGATE_REDIS_ADDR)
//	curl -i localhost:8080/hello                # listens on 127.0.0.1:8080 (-addr, or env ADDR)
//	curl -i -X POST localhost:8080/search       # the 5th search in a minute gets a 429
package main

import (
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/redisstore"
	"github.com/tollgate/tollgate/ginlimit"
)

// newApp returns the application's engine on the Redis of rdb, with keys
// under prefix, logging store failures to logger; and a function that
// releases its stores.
func newApp(rdb *redis.Client, prefix string, logger *slog.Logger) (*gin.Engine, func(), error) {
	// One store for both limiters: each Limiter's keys live in its own scope
	// (its name, derived from its limits), so both can key by client IP.
	// Without WithLogger, the store and the limiters log to slog.Default().
	store, err := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithLogger(logger))
	if err != nil {
		return nil, nil, err
	}
	fallback := memstore.New()
	closeStores := func() { store.Close(); fallback.Close() }

	// Store failures are logged, never sent to the client: the first of a
	// burst at once, then a count a second, per cause, without the key;
	// the circuit breaker when it opens and closes.
	lim, err := core.New(store, core.PerSecond(10), core.PerMinute(100),
		// Redis down: decide on the local memstore, on a quarter of each
		// limit, for a fleet of 4 instances.
		core.WithFailurePolicy(core.Fallback(fallback, core.FleetSize(4))),
		core.WithLogger(logger),
	)
	if err != nil {
		closeStores()
		return nil, nil, err
	}
	searchLim, err := core.New(store, core.PerMinute(20).Named("search"),
		// Redis down: the costly route answers 503 (the default policy).
		core.WithFailurePolicy(core.FailClosed),
		core.WithLogger(logger),
	)
	if err != nil {
		closeStores()
		return nil, nil, err
	}

	r := gin.New()
	r.Use(gin.Recovery())
	// App-wide, keyed by client IP: the peer address; see the gin
	// quickstart for servers behind a proxy.
	r.Use(ginlimit.New(lim))
	r.GET("/hello", func(c *gin.Context) {
		c.String(http.StatusOK, "hello\n")
	})
	// Per route: the middleware goes before the handler.
	r.POST("/search", ginlimit.New(searchLim, ginlimit.WithCost(5)), func(c *gin.Context) {
		c.String(http.StatusOK, "results\n")
	})
	return r, closeStores, nil
}

// newClient returns a client of the Redis at addr, with the options the
// store needs: ContextTimeoutEnabled lets the limiter's timeout bound a
// call to a Redis that hangs; MaxRetries and DialerRetries let a Redis that
// refuses connections be seen at the first refusal.
func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
}

func main() {
	addr := flag.String("addr", envOr("ADDR", "127.0.0.1:8080"), "listen address (env ADDR)")
	redisAddr := flag.String("redis", envOr("TOLLGATE_REDIS_ADDR", "127.0.0.1:6379"), "Redis address (env TOLLGATE_REDIS_ADDR)")
	selftest := flag.Bool("selftest", false, "serve on a free loopback port, send a few requests, check the answers and exit")
	flag.Parse()
	if *selftest {
		if err := selfTest(*redisAddr); err != nil {
			log.Fatalf("selftest: %v", err)
		}
		fmt.Println("selftest: ok")
		return
	}

	rdb := newClient(*redisAddr)
	defer rdb.Close()
	r, closeStores, err := newApp(rdb, redisstore.DefaultPrefix, slog.Default())
	if err != nil {
		log.Fatal(err)
	}
	defer closeStores()
	srv := &http.Server{Addr: *addr, Handler: r, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("listening on http://%s, limits in the Redis at %s", *addr, *redisAddr)
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
