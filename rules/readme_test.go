package rules_test

// The README's section "Limits from strings and rules files": its Go
// snippets stand here verbatim between marker comments, so that they keep
// compiling, and its YAML and error messages are checked against the
// package. (Examples without an Output comment are compiled, not run.)

import (
	"context"
	"errors"
	"log"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/rules"
)

func Example_readmeParseLimits() {
	store := memstore.New()
	// README: ParseLimits
	limits, err := core.ParseLimits(os.Getenv("API_LIMITS")) // e.g. "10/s, 100/m gcra burst 20"
	if err != nil {
		log.Fatal(err)
	}
	lim, err := core.New(store, core.WithLimits(limits...))
	// README: end
	_, _ = lim, err
}

func Example_readmeOpen() {
	ctx := context.Background()
	store := memstore.New()
	var mux http.Handler
	// README: Open
	set, err := rules.Open(store, "rules.yaml")
	if err != nil {
		log.Fatal(err)
	}
	defer set.Close()
	// Reload on SIGHUP, and when the file changes.
	if err := set.ReloadOn(ctx, syscall.SIGHUP); err != nil {
		log.Fatal(err)
	}
	if err := set.Watch(ctx, 5*time.Second); err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(":8080", set.Middleware(mux)))
	// README: end
}

// readmeSection returns the guide on limits from strings and rules files
// (docs/rules.md), which holds the README's former section.
func readmeSection(t *testing.T) string {
	t.Helper()
	guide, err := os.ReadFile("../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(guide), "\n## Limits from strings\n")
	if !ok {
		t.Fatal("docs/rules.md has no section \"Limits from strings\"")
	}
	return section
}

// TestREADMEShowsTheseSnippets checks that every snippet between the
// markers above stands in the README's section.
func TestREADMEShowsTheseSnippets(t *testing.T) {
	section := readmeSection(t)
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "\n\t// README: " // a marker line, not this string
	parts := strings.Split(string(src), marker)
	for i := 1; i+1 < len(parts); i += 2 {
		name, body, _ := strings.Cut(parts[i], "\n")
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			lines = append(lines, strings.TrimPrefix(l, "\t"))
		}
		snippet := strings.Join(lines, "\n")
		if !strings.Contains(section, "```go\n"+snippet+"\n```") {
			t.Errorf("the README's section lacks the %q snippet:\n%s", name, snippet)
		}
	}
}

// TestREADMERulesFile checks the README's rules file, and the errors the
// section quotes.
func TestREADMERulesFile(t *testing.T) {
	section := readmeSection(t)
	_, yaml, _ := strings.Cut(section, "```yaml\n")
	yaml, _, _ = strings.Cut(yaml, "```")
	cfg, err := rules.Parse("rules.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("the README's rules file: %v", err)
	}
	if got := cfg.Limits("api", "pro"); len(got) != 1 || got[0].Name != "pro" || got[0].Burst != 20 {
		t.Errorf("the README's plan pro = %v, want 100/m gcra burst 20 name pro", got)
	}

	_, err = rules.Parse("rules.yaml", []byte(strings.Replace(yaml, "10/h name search", "0/h name search", 1)))
	var re *rules.Error
	if !errors.As(err, &re) || !strings.Contains(section, "`"+re.Error()+"`") {
		t.Errorf("the README quotes an error of a search limit of 0 that is not %q", err)
	}
	_, err = core.ParseLimits("10/s, 0/m")
	if err == nil || !strings.Contains(section, "`"+err.Error()+"`") {
		t.Errorf("the README quotes an error of ParseLimits that is not %q", err)
	}
	for _, written := range []string{"10/s, 120/m, 240/h", "100/m gcra burst 20 name api", "5/2h", "3/90s", "10/1.5s", "1/1h30m",
		"1000 per 2 hours", "60/m bucketed-window precision 10s", "10 per second; 100/minute", "10-S, 1000-H"} {
		if !strings.Contains(section, "`"+written+"`") {
			t.Errorf("the README's table lacks %q", written)
		}
		if _, err := core.ParseLimits(written); err != nil {
			t.Errorf("the README's %q: %v", written, err)
		}
	}
}

// TestDocFileParses checks the rules file of the package doc.
func TestDocFileParses(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(src), "// # The file\n//\n")
	if !ok {
		t.Fatal("doc.go has no section \"The file\"")
	}
	var yaml []string
	for _, line := range strings.Split(block, "\n") {
		if line == "//" {
			yaml = append(yaml, "")
			continue
		}
		l, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			break
		}
		yaml = append(yaml, l)
	}
	cfg, err := rules.Parse("doc.yaml", []byte(strings.Join(yaml, "\n")))
	if err != nil {
		t.Fatalf("the package doc's rules file: %v", err)
	}
	if got := len(cfg.Routes()); got != 3 {
		t.Errorf("the package doc's rules file has %d routes, want 3", got)
	}
}
