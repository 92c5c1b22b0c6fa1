// Command adaptivesim measures adaptive concurrency limits from outside:
// a backend whose latency grows with concurrency (slots served at once,
// a log-normal service time of median 20 ms, a FIFO queue beyond), whose
// capacity it changes while it runs, driven open-loop (Poisson arrivals,
// a client deadline of 1 s) over loopback HTTP through the real nethttp
// middleware. It compares, per scenario:
//
//	adaptive  Tollgate's adaptive limit, defaults (Gradient), priorities
//	          from a request header
//	none      no limit
//	fixed     core.InFlight(15, 5s): 1.5 × the slots, a well-chosen fixed limit
//	peer      platinummonkey/go-concurrency-limits v0.8.0, its default
//	          limiter (Vegas)
//
// and writes a Markdown table of the figures to standard output, and one
// SVG (limit, in flight and p99 over time) and one CSV (the same series)
// per scenario to -out; -replot redraws the SVGs from the CSVs:
//
//	cd bench && go run ./adaptivesim -out adaptivesim/plots
//	go run ./adaptivesim -replot -out adaptivesim/plots
//
// Time is scaled by -scale: real time runs that many times faster than
// simulated time. Every figure is reported in simulated time, so the
// scale changes none of them but the noise of the machine: above 1 the
// service is faster and the arrivals denser (at 2, 8,700 requests a
// second at 10× overload), which a busy 2-core machine cannot drive over
// loopback HTTP; the default 0.25 (a median of 80 ms, 1,090 requests a
// second at 10×) runs every scenario for the four targets in under half
// an hour, and leaves room for the machine's other work. Each scenario starts with 5 s of warm-up at
// half capacity (the same for every target), then measures.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

var errUnknownTarget = errors.New("unknown target")

func main() {
	scale := flag.Float64("scale", 0.25, "real time runs this many times faster than simulated time")
	out := flag.String("out", "adaptivesim", "directory of the SVG plots")
	only := flag.String("only", "", "comma-separated scenarios to run (default: all)")
	targets := flag.String("targets", strings.Join(targetNames, ","), "comma-separated targets to compare")
	fixed := flag.Int64("fixed", 15, "the InFlight limit of the fixed target")
	replotOnly := flag.Bool("replot", false, "redraw the plots from the CSV files in -out, without running")
	flag.Parse()
	if *replotOnly {
		if err := replot(*out, model{slots: 10, median: 20 * time.Millisecond}); err != nil {
			fmt.Fprintln(os.Stderr, "adaptivesim:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*scale, *out, *only, strings.Split(*targets, ","), *fixed); err != nil {
		fmt.Fprintln(os.Stderr, "adaptivesim:", err)
		os.Exit(1)
	}
}

func run(scale float64, out, only string, targets []string, fixed int64) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	m := model{slots: 10, median: 20 * time.Millisecond, deadline: time.Second, scale: scale}
	start := time.Now()
	unloaded, err := m.unloadedP99()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "unloaded p99 %v (capacity %.0f/s)\n", unloaded, m.capacity())
	var all []*outcome
	for _, sc := range scenarios(m) {
		if only != "" && !strings.Contains(","+only+",", ","+sc.name+",") {
			continue
		}
		var runs []*outcome
		for _, name := range targets {
			o, err := m.run(sc, name, fixed)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", sc.name, name, err)
			}
			fmt.Fprintf(os.Stderr, "%s/%s: %d requests, goodput %.1f%%, p99 %v, shed %.2f%%\n", sc.name, name,
				len(o.results), 100*o.goodput()/m.capacity(), o.p99(), 100*o.shedShare())
			runs = append(runs, o)
		}
		ss := make([]series, len(runs))
		for i, o := range runs {
			ss[i] = seriesOf(o)
		}
		if err := plot(out, sc, ss, unloaded); err != nil {
			return err
		}
		if err := writeCSV(out, sc, ss, unloaded); err != nil {
			return err
		}
		all = append(all, runs...)
	}
	report(os.Stdout, m, all, unloaded, targets, fixed, time.Since(start))
	return nil
}
