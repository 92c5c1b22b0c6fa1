// Command consumer is what `scripts/release.sh --dry-run` builds in a fresh
// module outside the repository, after `go get`ting the would-be release
// through a file-based module proxy with no replace directive: it serves
// requests through ginlimit, echolimit, fiberlimit, the net/http
// middleware on the Redis store and grpclimit's interceptor, and checks
// that each passes the first and denies the second (a limit of one per
// minute), with the rate-limit headers (gRPC: metadata). It exits 1, saying which adapter failed, otherwise prints
// "consumer: ok".
//
//	consumer -redis 127.0.0.1:6379
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/redisstore"
	"github.com/tollgate/tollgate/echolimit"
	"github.com/tollgate/tollgate/fiberlimit"
	"github.com/tollgate/tollgate/ginlimit"
	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/nethttp"
)

func main() {
	redisAddr := flag.String("redis", "127.0.0.1:6379", "the Redis for the redisstore check")
	flag.Parse()
	log.SetFlags(0)

	store := memstore.New()
	defer store.Close()
	limiter := func(name string, s core.Store) *core.Limiter {
		lim, err := core.New(s, core.PerMinute(1).Named(name))
		if err != nil {
			log.Fatalf("consumer: core.New: %v", err)
		}
		return lim
	}

	gin.SetMode(gin.ReleaseMode)
	g := gin.New()
	g.Use(ginlimit.New(limiter("gin", store)))
	g.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "ok") })

	e := echo.New()
	e.Use(echolimit.New(limiter("echo", store)))
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })

	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr,
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	var seed [6]byte
	_, _ = rand.Read(seed[:])
	rstore, err := redisstore.New(rdb, redisstore.WithPrefix("tollgate-consumer:"+hex.EncodeToString(seed[:])+":"))
	if err != nil {
		log.Fatalf("consumer: redisstore.New: %v", err)
	}
	defer rstore.Close()
	// FailClosed (the default): if Redis fails, the check sees 503s.
	n := nethttp.New(limiter("redis", rstore))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))

	failed := false
	for _, c := range []struct {
		name  string
		serve func() (base string, stop func(), err error)
	}{
		{"ginlimit", serveHTTP(g)},
		{"echolimit", serveHTTP(e)},
		{"nethttp on redisstore", serveHTTP(n)},
		{"fiberlimit", serveFiber(limiter("fiber", store))},
	} {
		if err := check(c.serve); err != nil {
			log.Printf("consumer: %s: %v", c.name, err)
			failed = true
			continue
		}
		fmt.Printf("consumer: %s: 200 then 429\n", c.name)
	}
	if err := checkGRPC(limiter("grpc", store)); err != nil {
		log.Printf("consumer: grpclimit: %v", err)
		failed = true
	} else {
		fmt.Println("consumer: grpclimit: OK then ResourceExhausted")
	}
	if failed {
		log.Fatal("consumer: FAILED")
	}
	fmt.Println("consumer: ok")
}

// serveHTTP returns a function that serves h on a loopback port.
func serveHTTP(h http.Handler) func() (string, func(), error) {
	return func() (string, func(), error) {
		srv := httptest.NewServer(h)
		return srv.URL, srv.Close, nil
	}
}

// serveFiber returns a function that serves a fiber app limited by lim on
// a loopback port.
func serveFiber(lim *core.Limiter) func() (string, func(), error) {
	return func() (string, func(), error) {
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Use(fiberlimit.New(lim))
		app.Get("/", func(c *fiber.Ctx) error { return c.SendString("ok") })
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		go app.Listener(ln)
		return "http://" + ln.Addr().String(), func() { app.Shutdown() }, nil
	}
}

// check serves, sends two requests, and wants 200 then 429, both with the
// RateLimit-Policy header.
func check(serve func() (string, func(), error)) error {
	base, stop, err := serve()
	if err != nil {
		return err
	}
	defer stop()
	client := &http.Client{Timeout: 5 * time.Second}
	for _, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		resp, err := client.Get(base + "/")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("GET / = %d %q, want %d", resp.StatusCode, body, want)
		}
		if resp.Header.Get("RateLimit-Policy") == "" {
			return errors.New("GET / without a RateLimit-Policy header")
		}
	}
	return nil
}

// checkGRPC serves grpc-go's health service behind grpclimit's unary
// interceptor, limited by lim, on a loopback port, calls it twice, and
// wants OK then ResourceExhausted, both with ratelimit-policy metadata.
func checkGRPC(lim *core.Limiter) error {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go srv.Serve(ln)
	defer srv.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for _, want := range []codes.Code{codes.OK, codes.ResourceExhausted} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var md metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		cancel()
		if got := status.Code(err); got != want {
			return fmt.Errorf("Check = %v (%v), want %v", got, err, want)
		}
		if len(md.Get("ratelimit-policy")) == 0 {
			return errors.New("Check without ratelimit-policy metadata")
		}
	}
	return nil
}
