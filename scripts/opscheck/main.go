// Command opscheck proves ops/ against a real Prometheus: it loads the app
// of examples/metrics (run by scripts/prometheus.sh, which scrapes it every
// second under the rules of ops/prometheus with their windows scaled down),
// stalls and then kills its Redis, and checks that
//
//   - no alert fires while the load is quiet (a baseline);
//   - each alert of the rules fires after its cause: a heavy client
//     (TollgateDenialsSpiking, TollgateHeavyHitter), Redis stalled
//     (TollgateStoreSlow, TollgateBreakerOpen, TollgatePolicyDeciding),
//     Redis dead (TollgateStoreFailures);
//   - every query of the Grafana dashboard (ops/grafana/tollgate.json)
//     returns series over the run.
//
// It is not part of any released module: scripts/prometheus.sh runs it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	prom := flag.String("prom", "", "Prometheus base URL")
	app := flag.String("app", "", "the app's base URL")
	redisPid := flag.Int("redis-pid", 0, "pid of the app's redis-server")
	rules := flag.String("rules", "", "the rules file, for its alert names")
	dashboard := flag.String("dashboard", "", "the Grafana dashboard JSON")
	flag.Parse()
	if err := run(*prom, *app, *redisPid, *rules, *dashboard); err != nil {
		fmt.Fprintln(os.Stderr, "opscheck:", err)
		os.Exit(1)
	}
	fmt.Println("opscheck: ok")
}

func run(prom, app string, redisPid int, rulesFile, dashboardFile string) error {
	alerts, err := alertNames(rulesFile)
	if err != nil {
		return err
	}
	queries, err := dashboardQueries(dashboardFile)
	if err != nil {
		return err
	}
	start := time.Now()
	stop := make(chan struct{})
	var heavy atomic.Bool
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 2 * time.Second}
	get := func(who string) {
		req, _ := http.NewRequest("GET", app+"/hello", nil)
		req.Header.Set("X-Client", who)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	// every calls f every d until stop.
	every := func(d time.Duration, f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					f()
				}
			}
		}()
	}
	// 20 clients well within their limits, throughout.
	for i := range 20 {
		every(300*time.Millisecond, func() { get(fmt.Sprint("client-", i)) })
	}
	// One client far past its limits, once started.
	every(5*time.Millisecond, func() {
		if heavy.Load() {
			get("heavy")
		}
	})
	defer func() { close(stop); wg.Wait() }()

	step := func(what string, d time.Duration) {
		fmt.Printf("opscheck: %5.1fs %s (%v)\n", time.Since(start).Seconds(), what, d)
		time.Sleep(d)
	}
	step("a quiet load", 12*time.Second)
	firing, err := firingNow(prom)
	if err != nil {
		return err
	}
	if len(firing) > 0 {
		// A host that stalls the machine for tens of milliseconds makes
		// one window's p99 slow, and an alert on it is right to fire.
		// What the baseline rules out is an alert that fires under the
		// quiet load itself: it still fires once the rules' windows (5s
		// here) have moved past the first look.
		quietSince := time.Now()
		step(fmt.Sprintf("the quiet load again, as %v fired", firing), 8*time.Second)
		again, err := firingNow(prom)
		if err != nil {
			return err
		}
		var still []string
		for _, a := range again {
			if slices.Contains(firing, a) {
				still = append(still, a+" ("+exprOverRun(prom, rulesFile, a, quietSince)+")")
			}
		}
		if len(still) > 0 {
			return fmt.Errorf("alerts firing under a quiet load, twice 8s apart: %v", still)
		}
		fmt.Printf("opscheck: %v fired under the quiet load once, not 8s later: a stall of the host, not of the rules\n", firing)
	}
	heavy.Store(true)
	step("a heavy client", 3*time.Second)
	if err := syscall.Kill(redisPid, syscall.SIGSTOP); err != nil {
		return err
	}
	step("Redis stalled (SIGSTOP)", 10*time.Second)
	syscall.Kill(redisPid, syscall.SIGCONT)
	if err := syscall.Kill(redisPid, syscall.SIGKILL); err != nil {
		return err
	}
	step("Redis dead", 10*time.Second)

	var problems []string
	fired, err := firedSince(prom, time.Since(start))
	if err != nil {
		return err
	}
	for _, a := range alerts {
		if !fired[a] {
			problems = append(problems, "alert "+a+" never fired; its expression over the run: "+
				exprOverRun(prom, rulesFile, a, start))
		}
	}
	for _, q := range queries {
		n, err := series(prom, q, start)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("dashboard query %s: %v", q, err))
		case n == 0:
			problems = append(problems, "dashboard query returned no series: "+q)
		}
	}
	fmt.Printf("opscheck: fired %v; %d dashboard queries checked\n", keys(fired), len(queries))
	if len(problems) > 0 {
		return fmt.Errorf("%d problems:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	return nil
}

// alertNames returns the names of the alerts of a rules file.
func alertNames(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no alert", file)
	}
	return out, nil
}

// dashboardQueries returns the queries of a Grafana dashboard's panels,
// with its variables set to match everything.
func dashboardQueries(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	r := strings.NewReplacer("$__rate_interval", "5s", "$job", ".*", "$limiter", ".*")
	var out []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, r.Replace(t.Expr))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no query", file)
	}
	return out, nil
}

type apiResult struct {
	Status string
	Error  string
	Data   struct {
		Result []struct {
			Metric map[string]string
			Value  [2]any
			Values [][2]any
		}
	}
}

func query(prom, path string, params url.Values) (*apiResult, error) {
	resp, err := http.Get(prom + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s", r.Error)
	}
	return &r, nil
}

// firingNow returns the Tollgate alerts firing now.
func firingNow(prom string) ([]string, error) {
	r, err := query(prom, "/api/v1/query", url.Values{"query": {`ALERTS{alertstate="firing"}`}})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range r.Data.Result {
		out = append(out, s.Metric["alertname"])
	}
	return out, nil
}

// firedSince returns the alerts that fired within the last d.
func firedSince(prom string, d time.Duration) (map[string]bool, error) {
	q := fmt.Sprintf(`max by (alertname) (max_over_time(ALERTS{alertstate="firing"}[%ds]))`, int(d.Seconds())+1)
	r, err := query(prom, "/api/v1/query", url.Values{"query": {q}})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, s := range r.Data.Result {
		out[s.Metric["alertname"]] = true
	}
	return out, nil
}

// series returns how many series q returned over the run, a sample a second.
func series(prom, q string, since time.Time) (int, error) {
	r, err := query(prom, "/api/v1/query_range", url.Values{"query": {q},
		"start": {fmt.Sprint(since.Unix())}, "end": {fmt.Sprint(time.Now().Unix())}, "step": {"1"}})
	if err != nil {
		return 0, err
	}
	return len(r.Data.Result), nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// exprOverRun describes, for a message, what an alert's expression gave
// over the run: the largest value of each of its series, at each second.
func exprOverRun(prom, rulesFile, alert string, since time.Time) string {
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		return err.Error()
	}
	m := regexp.MustCompile(`(?s)- alert: ` + alert + `\n\s*(?:#[^\n]*\n\s*)*expr: (\|\n(.*?)\n\s*for:|([^\n]*))`).FindStringSubmatch(string(b))
	if m == nil {
		return "(expression not found)"
	}
	expr := strings.TrimSpace(m[2] + m[3])
	q := fmt.Sprintf("max_over_time((%s)[%ds:1s])", expr, int(time.Since(since).Seconds())+1)
	r, err := query(prom, "/api/v1/query", url.Values{"query": {q}})
	if err != nil {
		return err.Error()
	}
	if len(r.Data.Result) == 0 {
		return "no value at any second: " + expr
	}
	var out []string
	for _, s := range r.Data.Result {
		out = append(out, fmt.Sprintf("%v max %v", s.Metric, s.Value[1]))
	}
	return strings.Join(out, "; ")
}
