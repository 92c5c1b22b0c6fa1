package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

var colors = map[string]string{"adaptive": "#1f77b4", "none": "#999999", "fixed": "#2ca02c", "peer": "#d62728"}

// plot writes <out>/<scenario>.svg: three panels over simulated time,
// the limit, the units in flight in the backend, and the p99 latency of
// the requests served in each 500 ms, one line per target.
func plot(out string, sc scenario, runs []*outcome, unloaded time.Duration) error {
	const width, panelH, left, top, gap = 720.0, 160.0, 60.0, 40.0, 40.0
	plotW := width - left - 130
	var b strings.Builder
	height := top + 3*(panelH+gap)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="14">%s</text>`+"\n", left, esc(sc.title))
	dur := sc.duration.Seconds()
	type series struct {
		name string
		pts  [][2]float64
	}
	panels := []struct {
		title string
		data  func(o *outcome) [][2]float64
		ref   float64 // a dashed reference line; 0: none
	}{
		{"limit", func(o *outcome) [][2]float64 {
			var p [][2]float64
			for _, s := range o.samples {
				if s.at >= 0 && s.limit >= 0 {
					p = append(p, [2]float64{s.at.Seconds(), s.limit})
				}
			}
			return p
		}, 0},
		{"in flight in the backend (slots dashed)", func(o *outcome) [][2]float64 {
			var p [][2]float64
			for _, s := range o.samples {
				if s.at >= 0 {
					p = append(p, [2]float64{s.at.Seconds(), float64(s.inflight)})
				}
			}
			return p
		}, 0},
		{"p99 of served, ms per 500 ms (2 × unloaded dashed)", func(o *outcome) [][2]float64 {
			var p [][2]float64
			for t := time.Duration(0); t < o.sc.duration; t += 500 * time.Millisecond {
				if v := o.p99In(t, t+500*time.Millisecond); v >= 0 {
					p = append(p, [2]float64{(t + 250*time.Millisecond).Seconds(), float64(v) / 1e6})
				}
			}
			return p
		}, 2 * float64(unloaded) / 1e6},
	}
	for i, pn := range panels {
		y0 := top + float64(i)*(panelH+gap)
		var all []series
		ymax := pn.ref
		for _, o := range runs {
			s := series{o.target, pn.data(o)}
			for _, p := range s.pts {
				ymax = max(ymax, p[1])
			}
			all = append(all, s)
		}
		if i == 1 { // the slots, for reference
			for _, s := range runs[0].samples {
				ymax = max(ymax, float64(s.slots))
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
		if i == 1 {
			var pts []string
			for _, s := range runs[0].samples {
				if s.at >= 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.at.Seconds()), y(float64(s.slots))))
				}
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#000" stroke-dasharray="4 3"/>`+"\n", strings.Join(pts, " "))
		}
		for _, s := range all {
			if len(s.pts) == 0 {
				continue
			}
			pts := make([]string, len(s.pts))
			for k, p := range s.pts {
				pts[k] = fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1]))
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(pts, " "), colors[s.name])
		}
	}
	for k, o := range runs {
		yy := top + 10 + float64(k)*16
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			left+plotW+10, left+plotW+30, yy, yy, colors[o.target], left+plotW+35, yy+4, o.target)
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(filepath.Join(out, sc.name+".svg"), []byte(b.String()), 0o644)
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
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

// writeCSV writes <out>/<scenario>.csv: every 100 ms sample of every
// target (time in simulated seconds, limit, in flight, slots), and the
// p99 of served requests in the 500 ms ending at each sample, in ms.
func writeCSV(out string, sc scenario, runs []*outcome) error {
	var b strings.Builder
	b.WriteString("target,t_s,limit,in_flight,slots,p99_ms\n")
	for _, o := range runs {
		for _, s := range o.samples {
			if s.at < 0 {
				continue
			}
			p := o.p99In(s.at-500*time.Millisecond, s.at)
			fmt.Fprintf(&b, "%s,%.1f,%g,%d,%d,%.1f\n", o.target, s.at.Seconds(), s.limit, s.inflight, s.slots, float64(p)/1e6)
		}
	}
	return os.WriteFile(filepath.Join(out, sc.name+".csv"), []byte(b.String()), 0o644)
}
