package main

import (
	"encoding/xml"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const output = `goos: linux
goarch: amd64
pkg: github.com/tollgate/tollgate/bench
cpu: AMD EPYC
BenchmarkMemory/case=hotkey/lib=tollgate-2         	  300000	       101.0 ns/op	        99.00 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkMemory/case=hotkey/lib=sethvargo-2        	  300000	        90.0 ns/op	        85.00 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkMemory/case=hotkey/lib=tollgate-2         	  300000	       120.0 ns/op	        97.00 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkMemory/case=hotkey/lib=sethvargo-2        	  300000	        95.0 ns/op	        95.00 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkMemory/case=hotkey/lib=tollgate-2         	  300000	       110.0 ns/op	       130.00 cpu-ns/op	       0 B/op	       0 allocs/op
BenchmarkMemory/case=keys10k/lib=ulule             	  300000	       300.0 ns/op	       32 B/op	       2 allocs/op
    memory_test.go:60: a log line: BenchmarkMemory/case=x/lib=y 1 2 cpu-ns/op
BenchmarkMemory/case=keys10k/lib=tollgate-gcra-16  	  300000	       120.5 ns/op	       121.50 cpu-ns/op
BenchmarkOther-2                                   	  300000	       5.0 ns/op	       5.0 cpu-ns/op
PASS
ok  	github.com/tollgate/tollgate/bench	12.3s
`

func TestParseReadsEachBenchmarksCaseLibraryAndMetric(t *testing.T) {
	tests := []struct {
		name   string
		metric string
		want   []Sample
	}{
		{"cpu-ns/op is read from each line that reports it", "cpu-ns/op", []Sample{
			{"hotkey", "tollgate", 99}, {"hotkey", "sethvargo", 85}, {"hotkey", "tollgate", 97},
			{"hotkey", "sethvargo", 95}, {"hotkey", "tollgate", 130}, {"keys10k", "tollgate-gcra", 121.5},
		}},
		{"ns/op is read from every case=/lib= line", "ns/op", []Sample{
			{"hotkey", "tollgate", 101}, {"hotkey", "sethvargo", 90}, {"hotkey", "tollgate", 120},
			{"hotkey", "sethvargo", 95}, {"hotkey", "tollgate", 110}, {"keys10k", "ulule", 300},
			{"keys10k", "tollgate-gcra", 120.5},
		}},
		{"a metric no line reports gives nothing", "decisions/s", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(output), tc.metric)
			if err != nil {
				t.Fatalf("Parse(output, %q): %v", tc.metric, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(output, %q) = %v, want %v", tc.metric, got, tc.want)
			}
		})
	}
}

func TestParseRejectsValuesThatDoNotParse(t *testing.T) {
	for _, line := range []string{
		"BenchmarkMemory/case=a/lib=b-2 10 1.0 ns/op x cpu-ns/op",
		"BenchmarkMemory/case=a/lib=b-2 10 1.0 ns/op -3 cpu-ns/op",
		"BenchmarkMemory/case=a/lib=b-2 10 1.0 ns/op NaN cpu-ns/op",
		"BenchmarkMemory/case=a/lib=b-2 10 1.0 ns/op 4.0",
	} {
		if got, err := Parse(strings.NewReader(line), "cpu-ns/op"); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v, %v; want an error wrapping ErrMalformed", line, got, err)
		}
	}
}

func TestNamePartsDropsOnlyTheGOMAXPROCSSuffix(t *testing.T) {
	tests := []struct{ name, c, lib string }{
		{"BenchmarkMemory/case=hotkey/lib=tollgate-2", "hotkey", "tollgate"},
		{"BenchmarkMemory/case=hotkey/lib=tollgate-gcra-16", "hotkey", "tollgate-gcra"},
		{"BenchmarkMemory/case=hotkey-denied/lib=tollgate-gcra", "hotkey-denied", "tollgate-gcra"},
		{"BenchmarkMemory/lib=x/case=parallel100k-2", "parallel100k", "x"},
		{"BenchmarkMemory/case=hotkey-2", "hotkey", ""},
	}
	for _, tc := range tests {
		if c, lib := nameParts(tc.name); c != tc.c || lib != tc.lib {
			t.Errorf("nameParts(%q) = %q, %q; want %q, %q", tc.name, c, lib, tc.c, tc.lib)
		}
	}
}

func TestSummarizeTakesMediansInOrderOfAppearance(t *testing.T) {
	samples, err := Parse(strings.NewReader(output), "cpu-ns/op")
	if err != nil {
		t.Fatal(err)
	}
	got := Summarize(samples)
	nan := math.NaN()
	want := Table{
		Cases:  []string{"hotkey", "keys10k"},
		Libs:   []string{"tollgate", "sethvargo", "tollgate-gcra"},
		Median: [][]float64{{99, 90, nan}, {nan, nan, 121.5}},
		N:      [][]int{{3, 2, 0}, {0, 0, 1}},
	}
	if !reflect.DeepEqual(got.Cases, want.Cases) || !reflect.DeepEqual(got.Libs, want.Libs) || !reflect.DeepEqual(got.N, want.N) {
		t.Fatalf("Summarize = %+v, want %+v", got, want)
	}
	for i := range want.Median {
		for j, w := range want.Median[i] {
			if g := got.Median[i][j]; g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Errorf("median of %s/%s = %v, want %v", want.Cases[i], want.Libs[j], g, w)
			}
		}
	}
}

func TestMarkdownGivesTheFastestPeerOverEachTollgateVariant(t *testing.T) {
	samples, _ := Parse(strings.NewReader(output), "cpu-ns/op")
	got := Markdown(Summarize(samples), "cpu-ns/op")
	want := "| case (cpu-ns/op, medians) | tollgate | sethvargo | tollgate-gcra | fastest peer ÷ tollgate | fastest peer ÷ tollgate-gcra |\n" +
		"|---|--:|--:|--:|--:|--:|\n" +
		"| hotkey | 99.0 | 90.0 | – | 0.91 | – |\n" +
		"| keys10k | – | – | 122 | – | – |\n"
	if got != want {
		t.Errorf("Markdown =\n%s\nwant\n%s", got, want)
	}
}

// A floor (BenchmarkMemoryFloor's floor-mutex, floor-cas, …), faster
// than any library, is charted but never taken for the fastest peer.
func TestFloorsAreNotPeers(t *testing.T) {
	samples, err := Parse(strings.NewReader(`BenchmarkMemoryFloor/case=hotkey/lib=tollgate-2  300000  90.0 ns/op  90.0 cpu-ns/op
BenchmarkMemoryFloor/case=hotkey/lib=sethvargo-2  300000  95.0 ns/op  95.0 cpu-ns/op
BenchmarkMemoryFloor/case=hotkey/lib=floor-cas-2  300000  45.0 ns/op  45.0 cpu-ns/op
`), "cpu-ns/op")
	if err != nil {
		t.Fatal(err)
	}
	got := Markdown(Summarize(samples), "cpu-ns/op")
	if !strings.Contains(got, "| hotkey | 90.0 | 95.0 | 45.0 | 1.06 |") {
		t.Errorf("Markdown =\n%s\nwant sethvargo's 95 over tollgate's 90 (1.06), not floor-cas's 45", got)
	}
}

// The chart is well-formed XML with one bar per case and library that has
// a median, and run writes it and the table.
func TestRunWritesAWellFormedChartWithABarPerMedian(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "bench.txt"), filepath.Join(dir, "chart.svg")
	if err := os.WriteFile(in, []byte(output), 0o644); err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := run([]string{in}, "cpu-ns/op", out, "T", &table); err != nil {
		t.Fatalf("run: %v", err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rects []struct {
			Title string `xml:"title"`
		} `xml:"rect"`
	}
	if err := xml.Unmarshal(svg, &doc); err != nil {
		t.Fatalf("the chart is not well-formed XML: %v", err)
	}
	var bars []string
	for _, r := range doc.Rects {
		if r.Title != "" {
			bars = append(bars, r.Title)
		}
	}
	wantBars := []string{"hotkey tollgate: 99.0 cpu-ns/op", "hotkey sethvargo: 90.0 cpu-ns/op", "keys10k tollgate-gcra: 122 cpu-ns/op"}
	if !reflect.DeepEqual(bars, wantBars) {
		t.Errorf("bars = %q, want %q", bars, wantBars)
	}
	if !strings.Contains(table.String(), "| hotkey | 99.0 | 90.0 |") {
		t.Errorf("run wrote the table\n%s\nwant the hotkey row's medians", table.String())
	}
	if err := run([]string{in}, "no-such/op", out, "T", &table); err == nil {
		t.Errorf("run with a metric no benchmark reports: err = nil, want an error")
	}
}

func TestTickGivesFourToTenSteps(t *testing.T) {
	for _, maxV := range []float64{0.3, 1, 7, 10, 99, 100, 101, 350, 999, 1234, 98765} {
		step := tick(maxV)
		if n := math.Ceil(maxV / step); n < 4 || n > 10 {
			t.Errorf("tick(%v) = %v: %v steps, want 4 to 10", maxV, step, n)
		}
	}
}
