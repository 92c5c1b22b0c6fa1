// Command plot reads the output of go test -bench for BenchmarkMemory
// (benchmarks named …/case=C/lib=L) and writes a bar chart of one metric,
// per library per case, as an SVG image, and the same medians as a
// Markdown table on standard output:
//
//	cd bench && go test -run='^$' -bench='^BenchmarkMemory$' -benchmem -count=5 -cpu=2 . | tee /tmp/bench-mem.txt
//	go run ./plot -o memory.svg /tmp/bench-mem.txt
//
// Each bar is the median of the runs of its benchmark. Libraries whose name
// starts with "tollgate" are this project's; the table ends with the
// fastest other library's median divided by each of those (above 1: the
// tollgate variant is faster).
//
// Flags:
//
//	-metric  the unit to plot, as go test prints it. Default: cpu-ns/op.
//	-o       the SVG file to write. Default: memory.svg.
//	-title   the chart's title. Default: "In-memory decisions".
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	metric := flag.String("metric", "cpu-ns/op", "the unit to plot")
	out := flag.String("o", "memory.svg", "the SVG file to write")
	title := flag.String("title", "In-memory decisions", "the chart's title")
	flag.Parse()
	if err := run(flag.Args(), *metric, *out, *title, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

// run reads the benchmark output in files (standard input when there are
// none), writes the chart of metric to out and the table to w.
func run(files []string, metric, out, title string, w io.Writer) error {
	var samples []Sample
	if len(files) == 0 {
		s, err := Parse(os.Stdin, metric)
		if err != nil {
			return err
		}
		samples = s
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		s, err := Parse(f, metric)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		samples = append(samples, s...)
	}
	t := Summarize(samples)
	if len(t.Cases) == 0 {
		return fmt.Errorf("no case=…/lib=… benchmark reports %s", metric)
	}
	if err := os.WriteFile(out, []byte(SVG(t, title, metric)), 0o644); err != nil {
		return err
	}
	_, err := io.WriteString(w, Markdown(t, metric))
	return err
}

// A Sample is one line of benchmark output: the case and library its name
// gives, and its value of the metric asked for.
type Sample struct {
	Case, Lib string
	Value     float64
}

// ErrMalformed is returned by Parse for a benchmark line whose values do
// not parse.
var ErrMalformed = errors.New("malformed benchmark line")

// Parse returns the samples of metric in r, go test -bench output: lines
// "BenchmarkX/case=C/lib=L-P  N  v1 unit1  v2 unit2 …". Other lines, and
// benchmarks without case= and lib= or without metric, are skipped. A
// benchmark line whose values do not parse is an error wrapping
// ErrMalformed.
func Parse(r io.Reader, metric string) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue // a benchmark's log line, not its result
		}
		c, lib := nameParts(f[0])
		if c == "" || lib == "" {
			continue
		}
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("line %d: %w: odd number of fields", line, ErrMalformed)
		}
		for i := 2; i+1 < len(f); i += 2 {
			if f[i+1] != metric {
				continue
			}
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("line %d: %w: %s %q", line, ErrMalformed, metric, f[i])
			}
			out = append(out, Sample{Case: c, Lib: lib, Value: v})
		}
	}
	return out, sc.Err()
}

// nameParts returns the case= and lib= elements of a benchmark's name,
// without the -GOMAXPROCS suffix go test adds to its last element.
func nameParts(name string) (c, lib string) {
	parts := strings.Split(name, "/")
	last := parts[len(parts)-1]
	if i := strings.LastIndexByte(last, '-'); i > 0 {
		if _, err := strconv.Atoi(last[i+1:]); err == nil {
			parts[len(parts)-1] = last[:i]
		}
	}
	for _, p := range parts {
		if v, ok := strings.CutPrefix(p, "case="); ok {
			c = v
		}
		if v, ok := strings.CutPrefix(p, "lib="); ok {
			lib = v
		}
	}
	return c, lib
}

// A Table holds the median of each case and library, in the order they
// first appear: Median[i][j] is that of Cases[i] and Libs[j], NaN when
// there was no sample.
type Table struct {
	Cases, Libs []string
	Median      [][]float64
	N           [][]int // samples behind each median
}

// Summarize returns the table of medians of samples.
func Summarize(samples []Sample) Table {
	var t Table
	values := map[[2]string][]float64{}
	for _, s := range samples {
		if !slices.Contains(t.Cases, s.Case) {
			t.Cases = append(t.Cases, s.Case)
		}
		if !slices.Contains(t.Libs, s.Lib) {
			t.Libs = append(t.Libs, s.Lib)
		}
		k := [2]string{s.Case, s.Lib}
		values[k] = append(values[k], s.Value)
	}
	for _, c := range t.Cases {
		row, n := make([]float64, len(t.Libs)), make([]int, len(t.Libs))
		for j, l := range t.Libs {
			row[j], n[j] = median(values[[2]string{c, l}]), len(values[[2]string{c, l}])
		}
		t.Median, t.N = append(t.Median, row), append(t.N, n)
	}
	return t
}

// median returns the median of v, NaN when v is empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ours reports whether lib is one of this project's variants.
func ours(lib string) bool { return strings.HasPrefix(lib, "tollgate") }

// floor reports whether lib is one of BenchmarkMemoryFloor's floors
// (floor-mutex, floor-cas, …): least designs, not libraries a user could
// pick, so never a peer.
func floor(lib string) bool { return lib == "floor" || strings.HasPrefix(lib, "floor-") }

// fastestPeer returns the least median of row among other libraries, and
// its library, or NaN when there is none. Floors are not peers.
func (t Table) fastestPeer(row int) (float64, string) {
	best, name := math.NaN(), ""
	for j, l := range t.Libs {
		if v := t.Median[row][j]; !ours(l) && !floor(l) && !math.IsNaN(v) && (math.IsNaN(best) || v < best) {
			best, name = v, l
		}
	}
	return best, name
}

// Markdown returns t as a Markdown table of medians of metric, with the
// fastest peer's median divided by each tollgate variant's.
func Markdown(t Table, metric string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| case (%s, medians) |", metric)
	for _, l := range t.Libs {
		fmt.Fprintf(&b, " %s |", l)
	}
	var mine []int
	for j, l := range t.Libs {
		if ours(l) {
			mine = append(mine, j)
			fmt.Fprintf(&b, " fastest peer ÷ %s |", l)
		}
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("--:|", len(t.Libs)+len(mine)))
	b.WriteString("\n")
	for i, c := range t.Cases {
		fmt.Fprintf(&b, "| %s |", c)
		for j := range t.Libs {
			fmt.Fprintf(&b, " %s |", num(t.Median[i][j]))
		}
		peer, _ := t.fastestPeer(i)
		for _, j := range mine {
			r := peer / t.Median[i][j]
			if math.IsNaN(r) || math.IsInf(r, 0) {
				b.WriteString(" – |")
			} else {
				fmt.Fprintf(&b, " %.2f |", r)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// num formats a median: to the unit from 100 up, else to a tenth; "–"
// for none.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
