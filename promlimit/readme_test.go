package promlimit_test

// The Prometheus snippet of docs/observing.md, verbatim between the
// marker comments, so that it keeps compiling. (An example without an
// Output comment is compiled, not run.)

import (
	"log"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/nethttp"
	"github.com/tollgate/tollgate/promlimit"
)

func Example_readme() {
	var hello http.Handler
	// README: promlimit
	obs, err := promlimit.New()
	if err != nil {
		log.Fatal(err)
	}
	prometheus.MustRegister(obs) // the default registry, which promhttp.Handler serves
	store := memstore.New(memstore.WithObserver(obs))
	lim, err := core.New(store, core.PerMinute(100).Named("per-minute"), core.WithName("api"), core.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /hello", nethttp.New(lim)(hello))
	mux.Handle("GET /metrics", promhttp.Handler()) // not limited: Prometheus scrapes it
	log.Fatal(http.ListenAndServe(":8080", mux))
	// README: end
}

// TestREADMEShowsTheSnippet checks that the snippet between the markers
// above stands in docs/observing.md.
func TestREADMEShowsTheSnippet(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../docs/observing.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "\t// README: promlimit\n", "\t// README: end\n"
	_, body, ok1 := strings.Cut(string(src), begin)
	body, _, ok2 := strings.Cut(body, end)
	if !ok1 || !ok2 {
		t.Fatalf("readme_test.go lacks the markers")
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	if snippet := strings.Join(lines, "\n"); !strings.Contains(string(readme), "```go\n"+snippet+"```\n") {
		t.Errorf("docs/observing.md lacks the snippet:\n%s", snippet)
	}
}
