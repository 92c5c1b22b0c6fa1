package examples_test

// The snippets of the README's "Use with your framework", verbatim between
// the marker comments, so that they keep compiling. (Examples without an
// Output comment are compiled, not run.)

import (
	"log"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/go-chi/chi/v5"
	"github.com/gofiber/fiber/v2"
	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/redisstore"
	"github.com/tollgate/tollgate/echolimit"
	"github.com/tollgate/tollgate/fiberlimit"
	"github.com/tollgate/tollgate/ginlimit"
	"github.com/tollgate/tollgate/nethttp"
)

// limiters is the README's common setup.
func limiters() (*core.Limiter, *core.Limiter, *core.Limiter) {
	// README: limiters
	store := memstore.New()
	lim, err := core.New(store, core.PerSecond(10), core.PerMinute(100))
	if err != nil {
		log.Fatal(err)
	}
	// A costly route's own limiter, on the same store: each Limiter keeps
	// its own state for a key (its scope is derived from its limits).
	searchLim, err := core.New(store, core.PerMinute(20).Named("search"))
	if err != nil {
		log.Fatal(err)
	}
	userLim, err := core.New(store, core.PerHour(1000).Named("per-user"))
	if err != nil {
		log.Fatal(err)
	}
	// README: end
	return lim, searchLim, userLim
}

func Example_gin() {
	lim, searchLim, userLim := limiters()
	var search, me gin.HandlerFunc
	// README: gin
	r := gin.New()
	r.Use(ginlimit.New(lim))                                                 // whole app, per client IP
	r.POST("/search", ginlimit.New(searchLim, ginlimit.WithCost(5)), search) // a costly route
	r.GET("/me", ginlimit.New(userLim, ginlimit.WithKeyFunc(func(c *gin.Context) (string, error) {
		return c.GetString("user"), nil // set by your auth middleware
	})), me)
	// README: end
}

func Example_echo() {
	lim, searchLim, _ := limiters()
	var search echo.HandlerFunc
	// README: echo
	e := echo.New()
	e.Use(echolimit.New(lim))                                                  // whole app, per client IP
	e.POST("/search", search, echolimit.New(searchLim, echolimit.WithCost(5))) // a costly route
	// README: end
}

func Example_fiber() {
	lim, searchLim, _ := limiters()
	var search fiber.Handler
	// README: fiber
	app := fiber.New()
	app.Use(fiberlimit.New(lim))                                                   // whole app, per client IP
	app.Post("/search", fiberlimit.New(searchLim, fiberlimit.WithCost(5)), search) // a costly route
	// README: end
}

func Example_nethttp() {
	lim, searchLim, _ := limiters()
	var hello, search http.Handler
	// README: net/http
	mux := http.NewServeMux()
	mux.Handle("GET /hello", hello)
	mux.Handle("POST /search", nethttp.New(searchLim, nethttp.WithCost(5))(search)) // a costly route
	log.Fatal(http.ListenAndServe(":8080", nethttp.New(lim)(mux)))                  // whole app, per client IP
	// README: end
}

func Example_chi() {
	lim, searchLim, _ := limiters()
	var search http.HandlerFunc
	// README: chi
	r := chi.NewRouter()
	r.Use(nethttp.New(lim))                                                     // whole app, per client IP
	r.With(nethttp.New(searchLim, nethttp.WithCost(5))).Post("/search", search) // a costly route
	// README: end
}

func Example_redis() {
	// README: redis
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379",
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1}) // see below
	store, err := redisstore.New(rdb) // module github.com/tollgate/tollgate/core/redisstore
	lim, err := core.New(store, core.PerMinute(100), core.PerHour(1000),
		core.WithFailurePolicy(core.Fallback(memstore.New(), core.FleetSize(4)))) // 4 instances share the quota; failures are logged
	// README: end
	_, _ = lim, err
}

// TestREADMEShowsTheseSnippets checks that every snippet between the
// markers above stands in README.md, so the README shows code that
// compiles.
func TestREADMEShowsTheseSnippets(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	const marker = "\n\t// README: " // a marker line, not this string
	for _, part := range strings.Split(string(src), marker)[1:] {
		name, body, _ := strings.Cut(part, "\n")
		if name == "end" {
			continue
		}
		body, _, _ = strings.Cut(body, marker+"end")
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			lines = append(lines, strings.TrimPrefix(l, "\t")) // the README's snippets are not indented
		}
		snippet := strings.Join(lines, "\n")
		if !strings.Contains(string(readme), snippet) {
			t.Errorf("README.md lacks the %q snippet:\n%s", name, snippet)
		}
		n++
	}
	if n < 7 {
		t.Errorf("found %d snippets between markers, want at least 7", n)
	}
}
