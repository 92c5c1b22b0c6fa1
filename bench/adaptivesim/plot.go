package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

var colors = map[string]string{"adaptive": "#1f77b4", "none": "#999999", "fixed": "#2ca02c", "peer": "#d62728"}

// series is what a plot shows of one target's run: every 100 ms of
// simulated time, the limit (-1: none), the requests in flight in the
// backend, its slots, and the p99 of the requests served in the 500 ms
// before (-1: none served).
type series struct {
	target                         string
	t, limit, inflight, slots, p99 []float64
}

func seriesOf(o *outcome) series {
	s := series{target: o.target}
	for _, x := range o.samples {
		if x.at < 0 {
			continue
		}
		p := o.p99In(x.at-500*time.Millisecond, x.at)
		s.t = append(s.t, x.at.Seconds())
		s.limit = append(s.limit, x.limit)
		s.inflight = append(s.inflight, float64(x.inflight))
		s.slots = append(s.slots, float64(x.slots))
		s.p99 = append(s.p99, float64(p)/1e6)
	}
	return s
}

// plot writes <out>/<scenario>.svg: three panels over simulated time,
// the limit, the requests in flight in the backend, and the p99 latency
// of the requests served in the last 500 ms, one line per target. The
// scales fit the limited targets: "none", whose queue and latency grow to
// the clients' deadline, is cut at the top.
func plot(out string, sc scenario, runs []series, unloaded time.Duration) error {
	const width, panelH, left, top, gap = 720.0, 160.0, 60.0, 40.0, 40.0
	plotW := width - left - 130
	var b strings.Builder
	height := top + 3*(panelH+gap)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="14">%s</text>`+"\n", left, esc(sc.title))
	dur := sc.duration.Seconds()
	panels := []struct {
		title string
		data  func(s *series) []float64
		ref   float64 // a dashed reference line; 0: none
	}{
		{"limit", func(s *series) []float64 { return s.limit }, 0},
		{"in flight in the backend (slots dashed)", func(s *series) []float64 { return s.inflight }, 0},
		{"p99 of served in the last 500 ms, ms (2 × unloaded dashed)", func(s *series) []float64 { return s.p99 }, 2 * float64(unloaded) / 1e6},
	}
	for i, pn := range panels {
		y0 := top + float64(i)*(panelH+gap)
		ymax := pn.ref
		for k := range runs {
			if runs[k].target == "none" && len(runs) > 1 {
				continue
			}
			for _, v := range pn.data(&runs[k]) {
				ymax = max(ymax, v)
			}
			if i == 1 {
				for _, v := range runs[k].slots {
					ymax = max(ymax, v)
				}
			}
		}
		ymax = niceCeil(ymax * 1.05)
		x := func(t float64) float64 { return left + plotW*t/dur }
		y := func(v float64) float64 { return y0 + panelH - panelH*math.Min(v, ymax)/ymax }
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", left, y0-6, esc(pn.title))
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#ccc"/>`+"\n", left, y0, plotW, panelH)
		for k := 0; k <= 4; k++ {
			v := ymax * float64(k) / 4
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, y(v)+4, trim(v))
		}
		for t := 0.0; t <= dur; t += 5 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%gs</text>`+"\n", x(t), y0+panelH+13, t)
		}
		if pn.ref > 0 {
			fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="4 3"/>`+"\n", left, left+plotW, y(pn.ref), y(pn.ref))
		}
		line := func(ts, vs []float64, style string) {
			var pts []string
			for k := range vs {
				if vs[k] >= 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(ts[k]), y(vs[k])))
				}
			}
			if len(pts) > 0 {
				fmt.Fprintf(&b, `<polyline points="%s" fill="none" %s/>`+"\n", strings.Join(pts, " "), style)
			}
		}
		if i == 1 && len(runs) > 0 {
			line(runs[0].t, runs[0].slots, `stroke="#000" stroke-dasharray="4 3"`)
		}
		for k := range runs {
			line(runs[k].t, pn.data(&runs[k]), `stroke="`+colors[runs[k].target]+`" stroke-width="1.5"`)
		}
	}
	for k := range runs {
		yy := top + 10 + float64(k)*16
		name := runs[k].target
		if name == "none" && len(runs) > 1 {
			name += " (cut at the top)"
		}
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			left+plotW+10, left+plotW+30, yy, yy, colors[runs[k].target], left+plotW+35, yy+4, name)
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(filepath.Join(out, sc.name+".svg"), []byte(b.String()), 0o644)
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trim(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.4g", v), ".0") }

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// writeCSV writes <out>/<scenario>.csv: a first line "# unloaded_p99_ms=…",
// then every target's series (see series), time in simulated seconds,
// p99 in ms. replot reads it back.
func writeCSV(out string, sc scenario, runs []series, unloaded time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# unloaded_p99_ms=%.3f\n", float64(unloaded)/1e6)
	b.WriteString("target,t_s,limit,in_flight,slots,p99_ms\n")
	for _, s := range runs {
		for k := range s.t {
			fmt.Fprintf(&b, "%s,%.1f,%g,%g,%g,%.1f\n", s.target, s.t[k], s.limit[k], s.inflight[k], s.slots[k], s.p99[k])
		}
	}
	return os.WriteFile(filepath.Join(out, sc.name+".csv"), []byte(b.String()), 0o644)
}

// replot redraws <out>/<scenario>.svg from <out>/<scenario>.csv for every
// scenario whose CSV is there: the plots without a new run.
func replot(out string, m model) error {
	for _, sc := range scenarios(m) {
		f, err := os.Open(filepath.Join(out, sc.name+".csv"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		runs, unloaded, err := readCSV(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s.csv: %w", sc.name, err)
		}
		if err := plot(out, sc, runs, unloaded); err != nil {
			return err
		}
	}
	return nil
}

func readCSV(r io.Reader) ([]series, time.Duration, error) {
	var unloaded time.Duration
	var runs []series
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# unloaded_p99_ms="); ok {
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, 0, err
			}
			unloaded = time.Duration(ms * 1e6)
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 6 || f[0] == "target" {
			continue
		}
		var v [5]float64
		for k := range v {
			x, err := strconv.ParseFloat(f[k+1], 64)
			if err != nil {
				return nil, 0, err
			}
			v[k] = x
		}
		if len(runs) == 0 || runs[len(runs)-1].target != f[0] {
			runs = append(runs, series{target: f[0]})
		}
		s := &runs[len(runs)-1]
		s.t, s.limit, s.inflight, s.slots, s.p99 = append(s.t, v[0]), append(s.limit, v[1]), append(s.inflight, v[2]), append(s.slots, v[3]), append(s.p99, v[4])
	}
	return runs, unloaded, sc.Err()
}
