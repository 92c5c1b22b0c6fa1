// Command posthoc charges requests whose cost is known only once they ran.
// Each request is admitted at an estimate; after the handler, the
// difference from the real cost is charged or refunded.
//
//   - POST /generate?max_tokens=N: a (fake) language model, limited to 1000
//     tokens per minute per client. It is admitted at max_tokens (default
//     100), the most it can cost, and the handler reports the tokens it
//     really produced with guard.ReportCost: the unused part is refunded. A
//     failed generation (5xx) is refunded in full.
//   - GET /download/{kib}: limited to 1024 KiB per minute per client. It is
//     admitted at 1, and charged the response's size in KiB, measured by
//     the middleware (WithResponseCost). Usage may go over the quota:
//     later requests then wait until it is repaid.
//
// Run it:
//
//	go run ./posthoc                            # listens on 127.0.0.1:8080 (-addr, or env ADDR)
//	curl -i -d 'tell me a story' 'localhost:8080/generate?max_tokens=200'
//	curl -s -o /dev/null -D - localhost:8080/download/300
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/nethttp"
)

// maxTokens reads the max_tokens query parameter: the estimate at which a
// generation is admitted. Default 100.
func maxTokens(r *http.Request) (int64, error) {
	s := r.URL.Query().Get("max_tokens")
	if s == "" {
		return 100, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > 1000 {
		return 0, errors.New("max_tokens: want a number from 1 to 1000")
	}
	return n, nil
}

// generate stands in for a language model: 5 tokens per word of the
// prompt, at most limit. A prompt of "fail" fails.
func generate(prompt string, limit int64) (string, int64, error) {
	if strings.TrimSpace(prompt) == "fail" {
		return "", 0, errors.New("the model is down")
	}
	n := min(5*int64(len(strings.Fields(prompt))), limit)
	return strings.Repeat("la ", int(n)), n, nil
}

// newApp returns the application's handler and a function that releases
// its stores.
func newApp() (http.Handler, func(), error) {
	// One store per limiter: limiters that share a store must not share
	// keys, and both key by client IP.
	tokenStore, bytesStore := memstore.New(), memstore.New()
	closeStores := func() { tokenStore.Close(); bytesStore.Close() }
	tokens, err := core.New(tokenStore, core.PerMinute(1000).Named("tokens"))
	if err != nil {
		closeStores()
		return nil, nil, err
	}
	kib, err := core.New(bytesStore, core.PerMinute(1024).Named("kib"))
	if err != nil {
		closeStores()
		return nil, nil, err
	}

	mux := http.NewServeMux()
	mux.Handle("POST /generate", nethttp.New(tokens,
		nethttp.WithCostFunc(maxTokens),          // admit at the most it may cost
		nethttp.WithReportedCost(),               // let the handler report the real cost
		nethttp.WithRefundOn(guard.ServerErrors), // a 5xx costs nothing
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, _ := maxTokens(r) // checked by the cost function
		prompt, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		if err != nil {
			http.Error(w, "bad request body", http.StatusBadRequest)
			return
		}
		text, used, err := generate(string(prompt), limit)
		if err != nil {
			http.Error(w, "generation failed", http.StatusInternalServerError)
			return
		}
		// The real cost: after this handler returns, the middleware refunds
		// limit-used (or charges the excess, had it been more).
		guard.ReportCost(r.Context(), used)
		w.Header().Set("X-Tokens-Used", strconv.FormatInt(used, 10))
		fmt.Fprintln(w, text)
	})))

	mux.Handle("GET /download/{kib}", nethttp.New(kib,
		nethttp.WithCost(1), // admitted at 1: the size is not known yet
		nethttp.WithResponseCost(func(res guard.Result) int64 {
			return 1 + res.Bytes/1024 // settled at the response's size
		}),
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("kib"))
		if err != nil || n < 0 || n > 1024 {
			http.Error(w, "size: want 0 to 1024 KiB", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(bytes.Repeat([]byte{'x'}, n*1024))
	})))
	return mux, closeStores, nil
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

	h, closeStores, err := newApp()
	if err != nil {
		log.Fatal(err)
	}
	defer closeStores()
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
