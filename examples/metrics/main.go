// Command metrics serves an app limited by Tollgate with its Prometheus
// metrics on /metrics: the limiter's decisions, the store's latency and
// failures, the circuit breaker's state, and the top denied keys' counts
// (by rank, never the key). It is the app that scripts/prometheus.sh
// scrapes with a real Prometheus, to prove the rules and the dashboard in
// ops/.
//
//	go run ./metrics                            # in memory; listens on 127.0.0.1:8080 (-addr, or env ADDR)
//	go run ./metrics -redis 127.0.0.1:6379      # on Redis, falling back to memory while it is down
//	curl -s localhost:8080/metrics | grep tollgate_
package main

import (
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/redisstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
	"github.com/tollgate/tollgate/nethttp"
	"github.com/tollgate/tollgate/promlimit"
	"github.com/tollgate/tollgate/topk"
)

// newApp returns the application's handler, with its metrics on /metrics
// from reg, and a function that releases its stores. redisAddr "" keeps
// the limits in memory.
func newApp(reg *prometheus.Registry, redisAddr string) (http.Handler, func(), error) {
	obs, err := promlimit.New()
	if err != nil {
		return nil, nil, err
	}
	denied, err := topk.New()
	if err != nil {
		return nil, nil, err
	}
	reg.MustRegister(obs, promlimit.NewTopDenied(denied, 5))

	var store core.Store
	var closeStores func()
	opts := []core.Option{core.PerSecond(10).Named("per-second"), core.PerMinute(300).Named("per-minute"),
		core.WithName("api"), core.WithObserver(obs)}
	if redisAddr == "" {
		ms := memstore.New(memstore.WithObserver(obs))
		store, closeStores = ms, func() { ms.Close() }
	} else {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		rs, err := redisstore.New(rdb, redisstore.WithObserver(obs))
		if err != nil {
			return nil, nil, err
		}
		fallback := memstore.New(memstore.WithObserver(obs))
		store, closeStores = rs, func() { rs.Close(); fallback.Close(); rdb.Close() }
		opts = append(opts, core.WithFailurePolicy(core.Fallback(fallback, core.FleetSize(2))))
	}
	lim, err := core.New(store, opts...)
	if err != nil {
		closeStores()
		return nil, nil, err
	}

	mux := http.NewServeMux()
	// Keyed by the X-Client header when there is one (so that a load
	// generator on one address can be many clients), else the client IP.
	key := keyfuncs.Func(func(r keyfuncs.Request) (string, error) {
		if c := r.Header("X-Client"); c != "" {
			return c, nil
		}
		return keyfuncs.IP()(r)
	})
	limited := nethttp.New(lim, nethttp.WithKey(key), guard.WithOnDenied(topk.OnDenied(denied)))
	mux.Handle("GET /hello", limited(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux, closeStores, nil
}

func main() {
	addr := flag.String("addr", envOr("ADDR", "127.0.0.1:8080"), "listen address (env ADDR)")
	redisAddr := flag.String("redis", "", "keep the limits in the Redis at this address (default: in memory)")
	selftest := flag.Bool("selftest", false, "serve on a free loopback port, check the metrics and exit")
	flag.Parse()
	// go-redis's own lines (a line per failed dial while Redis is down)
	// go to slog at debug level, at most one a second per kind.
	redis.SetLogger(redisstore.GoRedisLogger(slog.Default()))
	if *selftest {
		if err := selfTest(*redisAddr); err != nil {
			log.Fatalf("selftest: %v", err)
		}
		fmt.Println("selftest: ok")
		return
	}
	h, closeStores, err := newApp(prometheus.NewRegistry(), *redisAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer closeStores()
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("listening on http://%s (metrics on /metrics)", *addr)
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
