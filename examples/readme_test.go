package examples_test

// The snippets of the README and of the guides in docs/, verbatim between
// the marker comments, so that they keep compiling. (Examples without an
// Output comment are compiled, not run.)

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-chi/chi/v5"
	"github.com/gofiber/fiber/v2"
	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/core/redisstore"
	"github.com/tollgate/tollgate/echolimit"
	"github.com/tollgate/tollgate/fiberlimit"
	"github.com/tollgate/tollgate/ginlimit"
	"github.com/tollgate/tollgate/grpclimit"
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

func Example_grpc() {
	lim, _, _ := limiters()
	// README: grpc
	costs := grpclimit.WithMethodCosts(map[string]int64{"/search.v1.Search/Query": 5}, 1) // a costly method
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, costs)), // every RPC, per client IP
		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim)),      // a stream: one decision, when it starts
	)
	// README: end
	_ = srv
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

func Example_install() {
	// README: install
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379",
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	store, err := redisstore.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	lim, err := core.New(store, core.PerSecond(10), core.PerMinute(100),
		core.WithFailurePolicy(core.Fallback(memstore.New(), core.FleetSize(4)))) // Redis down: ⌊limit/4⌋ here, see core.FleetSize
	if err != nil {
		log.Fatal(err)
	}
	r := gin.New()
	r.Use(ginlimit.New(lim))
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })
	log.Fatal(r.Run("127.0.0.1:8080"))
	// README: end
}

func Example_inFlight() {
	store := memstore.New()
	var ctx context.Context
	var key string
	// README: in flight
	lim, err := core.New(store, core.PerSecond(10), core.InFlight(3, time.Minute)) // 10/s and 3 at a time
	d, err := lim.Allow(ctx, key)
	if d.Lease > 0 { // allowed, holding units (FailOpen admits holding none)
		defer lim.Release(ctx, key, d.Lease) // idempotent; a lease is never issued twice on a key
	}
	// README: end
	_ = err
}

// TestREADMEShowsTheseSnippets checks that every snippet between the
// markers above stands in README.md or a guide of docs/, so that they
// show code that compiles.
func TestREADMEShowsTheseSnippets(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme := readmeAndGuides(t)
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
		if !strings.Contains(readme, snippet) {
			t.Errorf("neither README.md nor docs/ has the %q snippet:\n%s", name, snippet)
		}
		n++
	}
	if n < 8 {
		t.Errorf("found %d snippets between markers, want at least 8", n)
	}
}

// TestREADMEInstallNamesTheModules checks the README's Install section
// against the repository: every module it has users go get, require or
// replace exists, and each replace points at that module's directory in a
// clone named tollgate.
func TestREADMEInstallNamesTheModules(t *testing.T) {
	// The README's Install section has the go get lines; docs/install.md's
	// the require and replace lines of a clone.
	var install string
	for _, file := range []string{"../README.md", "../docs/install.md"} {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		_, section, ok := strings.Cut(string(text), "\n## Install\n")
		if !ok {
			t.Fatalf("%s has no Install section", file)
		}
		section, _, _ = strings.Cut(section, "\n## ")
		install += section
	}

	// modulePath returns the module path in dir's go.mod (dir relative to
	// the repository root), or "" if there is none.
	modulePath := func(dir string) string {
		data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(dir), "go.mod"))
		if err != nil {
			return ""
		}
		for _, line := range strings.Split(string(data), "\n") {
			if p, ok := strings.CutPrefix(line, "module "); ok {
				return strings.TrimSpace(p)
			}
		}
		return ""
	}
	root := modulePath(".")
	dirOf := func(path string) string {
		if path == root {
			return "."
		}
		return strings.TrimPrefix(path, root+"/")
	}

	gets, required, replaced := 0, map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(install, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "go" && f[1] == "get":
			path, version, _ := strings.Cut(f[2], "@")
			if got := modulePath(dirOf(path)); got != path {
				t.Errorf("README: go get %s: no module %s in the repository (found %q)", f[2], path, got)
			}
			if version != "v0.1.0" {
				t.Errorf("README: go get %s, want the version v0.1.0 the other lines use", f[2])
			}
			gets++
		case len(f) == 2 && strings.HasPrefix(f[0], root) && f[1] == "v0.0.0":
			required[f[0]] = true
		case len(f) == 3 && strings.HasPrefix(f[0], root) && f[1] == "=>":
			replaced[f[0]] = true
			dir, ok := strings.CutPrefix(f[2], "../tollgate")
			dir = strings.TrimPrefix(dir, "/")
			if dir == "" {
				dir = "."
			}
			if got := modulePath(dir); !ok || got != f[0] {
				t.Errorf("README: replace %s => %s: that directory of the clone holds module %q", f[0], f[2], got)
			}
		}
	}
	if gets == 0 || len(required) == 0 {
		t.Fatalf("README's Install section: found %d go get lines and %d requires, want some of each", gets, len(required))
	}
	if !required[root] {
		t.Errorf("README's Install section does not require the root module %s, which the replace lines need", root)
	}
	for p := range required {
		if !replaced[p] {
			t.Errorf("README: require %s without a replace line", p)
		}
	}
	for p := range replaced {
		if !required[p] {
			t.Errorf("README: replace %s without a require line", p)
		}
	}
}

// readmeAndGuides returns README.md and every guide of docs/, joined.
func readmeAndGuides(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range append([]string{"../README.md"}, files...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(text)
		b.WriteString("\n")
	}
	return b.String()
}

// TestREADMEQuickStartCompiles builds every complete program of the
// README (a go block that starts with "package main") as a user would
// paste it: in a directory of its own in this module, imports included,
// and checks it is gofmt-formatted.
func TestREADMEQuickStartCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the README's programs")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var programs []string
	for _, part := range strings.Split(string(readme), "```go\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if strings.HasPrefix(block, "package main\n") {
			programs = append(programs, block)
		}
	}
	if len(programs) < 5 {
		t.Fatalf("README.md has %d complete programs, want one per framework (gin, echo, fiber, net/http, gRPC)", len(programs))
	}
	// A directory of this module that ./... skips (it starts with "_").
	dir, err := os.MkdirTemp(".", "_readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var pkgs []string
	for i, p := range programs {
		sub := filepath.Join(dir, fmt.Sprint("p", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "main.go"), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(sub))
	}
	args := append(append([]string{"build"}, buildFlags()...), "-o", os.DevNull)
	for _, p := range pkgs {
		if out, err := exec.Command(gobin, append(args, p)...).CombinedOutput(); err != nil {
			t.Errorf("go build of the README's program %s: %v\n%s", p, err, out)
		}
	}
	for i, p := range programs {
		out, err := exec.Command(filepath.Join(filepath.Dir(gobin), "gofmt"), "-l", filepath.Join(dir, fmt.Sprint("p", i), "main.go")).CombinedOutput()
		if err == nil && len(out) > 0 {
			t.Errorf("the README's program %d is not gofmt-formatted:\n%s", i+1, p)
		}
	}
}
