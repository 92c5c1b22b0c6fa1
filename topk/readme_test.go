package topk_test

// The README's snippet of "Who is being limited", verbatim between the
// marker comments, so that it keeps compiling. (An example without an
// Output comment is compiled, not run.)

import (
	"log"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/nethttp"
	"github.com/tollgate/tollgate/topk"
)

func Example_readme() {
	var lim *core.Limiter
	var secret []byte
	adminMux := http.NewServeMux()
	// README: topk
	denied, err := topk.New() // or topk.WithCostWeight(true) to rank by units refused
	if err != nil {
		log.Fatal(err)
	}
	mw := nethttp.New(lim, guard.WithOnDenied(topk.OnDenied(denied))) // any adapter
	ops, err := topk.NewHandler(denied, topk.WithHashSecret(secret))  // IDs stable across the fleet
	if err != nil {
		log.Fatal(err)
	}
	adminMux.Handle("GET /debug/topk", ops) // ?k=20; serve it to operators only
	for _, e := range denied.Top(10) {
		log.Printf("%s: denied %d times (at most %d too many)", e.Key, e.Count, e.Error)
	}
	// README: end
	_ = mw
}

// TestREADMEShowsTheSnippet checks that the snippet between the markers
// above stands in docs/observing.md, so the guide shows code that
// compiles.
func TestREADMEShowsTheSnippet(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../docs/observing.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "\t// README: topk\n", "\t// README: end\n"
	_, body, ok1 := strings.Cut(string(src), begin)
	body, _, ok2 := strings.Cut(body, end)
	if !ok1 || !ok2 {
		t.Fatalf("readme_test.go lacks the markers")
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t")) // the README's snippets are not indented
	}
	if snippet := strings.Join(lines, "\n"); !strings.Contains(string(readme), "```go\n"+snippet+"```\n") {
		t.Errorf("docs/observing.md lacks the snippet:\n%s", snippet)
	}
}
