// Command demo starts a real HTTP server on a free loopback port, limited by
// Tollgate's net/http middleware on the in-memory store, sends it a scripted
// burst from two clients and prints, for every request, the status and the
// rate-limit headers the client received. Then it shuts the server down.
//
//	go run ./cmd/demo
//
// The server has an app-wide limit of 5 per second and 10 per minute per API
// key (X-API-Key), and two routes with limiters of their own: POST /search
// costs 5 units of a "search" limit, and POST /generate is admitted at an
// estimate of 10 "tokens" and then charged what the handler reports it
// really produced. Requests run one at a time, in a fixed order, so statuses
// and remaining counts are the same on every run; t= and Retry-After depend
// on where the run falls within the clock's second and minute.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
	"github.com/tollgate/tollgate/nethttp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// server is the demo's application: its handler and the stores to close.
type server struct {
	handler http.Handler
	stores  []*memstore.Store
}

func (s *server) Close() {
	for _, st := range s.stores {
		st.Close()
	}
}

// newServer builds the limiters and the routes. The three limiters share
// one store and all key by the API key: each Limiter keeps its own state
// for a key, in the scope derived from its limits.
func newServer() (*server, error) {
	st := memstore.New()
	s := &server{stores: []*memstore.Store{st}}
	newLimiter := func(limits ...core.Option) (*core.Limiter, error) {
		return core.New(st, limits...)
	}
	app, err := newLimiter(core.PerSecond(5).Named("per-second"), core.PerMinute(10).Named("per-minute"))
	if err != nil {
		return nil, err
	}
	search, err := newLimiter(core.PerMinute(10).Named("search"))
	if err != nil {
		return nil, err
	}
	tokens, err := newLimiter(core.PerMinute(100).Named("tokens"))
	if err != nil {
		return nil, err
	}
	// Clients are told apart by their API key. A real server checks the key
	// before it limits on it; the demo trusts it.
	byKey := nethttp.WithKey(keyfuncs.Header("X-API-Key"))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s\n", r.Header.Get("X-API-Key"))
	})
	// A costly route: 5 units of its own limit.
	mux.Handle("POST /search", nethttp.New(search, byKey, nethttp.WithCost(5))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, "3 results")
		})))
	// A post-hoc cost: admitted at an estimate of 10 tokens; the handler
	// reports what it really produced, and the difference is charged (or
	// refunded) after it returns.
	mux.Handle("POST /generate", nethttp.New(tokens, byKey, nethttp.WithCost(10), nethttp.WithReportedCost())(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			prompt, _ := io.ReadAll(io.LimitReader(r.Body, 1<<10))
			n := generate(string(prompt))
			guard.ReportCost(r.Context(), n)
			fmt.Fprintf(w, "used %d", n)
		})))
	// The app-wide limit wraps the whole mux: every request pays 1 unit
	// here first, then its route's own cost.
	s.handler = nethttp.New(app, byKey)(mux)
	return s, nil
}

// generate stands in for a language model: it "produces" 10 tokens per
// word of the prompt, and returns how many.
func generate(prompt string) int64 { return 10 * int64(len(strings.Fields(prompt))) }

// step is one request of the script.
type step struct {
	client, method, path, body string
	note                       string
	wait                       time.Duration // sleep before the request
}

var script = []step{
	{client: "alice", method: "GET", path: "/hello", note: "a burst: 1 unit each"},
	{client: "alice", method: "GET", path: "/hello"},
	{client: "alice", method: "GET", path: "/hello"},
	{client: "alice", method: "GET", path: "/hello"},
	{client: "alice", method: "GET", path: "/hello"},
	{client: "alice", method: "GET", path: "/hello", note: "6th in a second"},
	{client: "bob", method: "GET", path: "/hello", note: "bob has his own quota"},
	{client: "bob", method: "POST", path: "/search", note: "weighted: cost 5"},
	{client: "bob", method: "POST", path: "/search", note: "cost 5"},
	{client: "bob", method: "POST", path: "/search", note: "cost 5"},
	{client: "alice", method: "POST", path: "/generate", body: "tell me a story", note: "estimate 10", wait: 2 * time.Second},
	{client: "alice", method: "POST", path: "/generate", body: "tell me a longer story please", note: "estimate 10"},
	{client: "alice", method: "POST", path: "/generate", body: "one more", note: "estimate 10; denied, so not counted app-wide"},
	{client: "alice", method: "GET", path: "/hello"},
	{client: "alice", method: "GET", path: "/hello"},
	{client: "alice", method: "GET", path: "/hello"},
	{client: "alice", method: "GET", path: "/hello", note: "the per-minute limit spent: 10 passed"},
}

func run(out io.Writer) error {
	s, err := newServer()
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()

	fmt.Fprintf(out, "Tollgate demo: net/http middleware on the in-memory store, serving %s\n", base)
	fmt.Fprintln(out, `  app-wide, per API key:  "per-second" 5/s and "per-minute" 10/min (every request pays 1 unit)`)
	fmt.Fprintln(out, `  POST /search:           "search" 10/min, each request costs 5`)
	fmt.Fprintln(out, `  POST /generate:         "tokens" 100/min, admitted at 10, then charged the tokens it used`)
	fmt.Fprintln(out, "  Stacked, they act as one decision: a request the route's limit denies costs nothing app-wide.")
	fmt.Fprintln(out)
	// Every line fits Width columns: the policies a route sends are shown
	// once, above the first answer of a route, and a note that would pass the
	// width goes on a line of its own.
	const row = "%-2s %-6s %-15s %-6s %-5s %s"
	fmt.Fprintf(out, row+"\n", "#", "client", "request", "status", "retry", "RateLimit  (note)")

	client := &http.Client{Timeout: 5 * time.Second}
	var problem string
	policies := map[string]bool{}
	for i, st := range script {
		if st.wait > 0 {
			fmt.Fprintf(out, "   ... %v later: every per-second window has passed ...\n", st.wait)
			time.Sleep(st.wait)
		}
		req, err := http.NewRequest(st.method, base+st.path, strings.NewReader(st.body))
		if err != nil {
			return err
		}
		req.Header.Set("X-API-Key", st.client)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		note := st.note
		if resp.StatusCode == http.StatusOK && st.path == "/generate" {
			var used int64
			fmt.Sscanf(string(body), "used %d", &used)
			note += fmt.Sprintf(", used %d: %+d settled after", used, used-10)
		}
		if resp.StatusCode == http.StatusTooManyRequests && problem == "" {
			var indented bytes.Buffer
			if json.Indent(&indented, body, "  ", "  ") != nil {
				indented.Write(body)
			}
			problem = fmt.Sprintf("The body of 429 #%d (%s):\n  %s", i+1, resp.Header.Get("Content-Type"), indented.String())
		}
		request := st.method + " " + st.path
		if p := resp.Header.Get("RateLimit-Policy"); p != "" && !policies[request] {
			policies[request] = true
			fmt.Fprintf(out, "   RateLimit-Policy: %s\n", p)
		}
		line := fmt.Sprintf(row, fmt.Sprint(i+1), st.client, request, fmt.Sprint(resp.StatusCode),
			orDash(resp.Header.Get("Retry-After")), orDash(resp.Header.Get("RateLimit")))
		switch {
		case note == "":
		case utf8.RuneCountInString(line)+2+len(note) <= Width:
			line += "  " + note
		default:
			line += "\n" + strings.Repeat(" ", 40) + note
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, problem)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(out, "\nserver shut down")
	return nil
}

// Width is the most columns a line of the demo's output takes.
const Width = 100

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
