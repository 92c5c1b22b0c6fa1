package main

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	barW     = 14  // one bar
	groupGap = 28  // between cases
	plotH    = 300 // the plot area's height
	left     = 60  // room for the y axis labels
	top      = 40  // room for the title
	bottom   = 40  // room for the case names
	legendW  = 190 // room for the legend, right of the plot
)

// peerColors are the bars of other libraries (pale), oursColors those of
// tollgate's variants (strong), in the order the libraries appear.
var (
	peerColors = []string{"#b0bec5", "#d7ccc8", "#cfd8dc", "#f8bbd0", "#fff59d", "#c5e1a5"}
	oursColors = []string{"#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a"}
)

// SVG returns t as a grouped bar chart: a group of bars per case, a bar per
// library, heights proportional to the medians of metric, each labelled
// with its value.
func SVG(t Table, title, metric string) string {
	groupW := len(t.Libs)*barW + groupGap
	width := left + len(t.Cases)*groupW + legendW
	height := top + plotH + bottom
	maxV := 0.0
	for _, row := range t.Median {
		for _, v := range row {
			if !math.IsNaN(v) {
				maxV = math.Max(maxV, v)
			}
		}
	}
	step := tick(maxV)
	yMax := math.Max(step, math.Ceil(maxV/step)*step)
	y := func(v float64) float64 { return top + plotH - v/yMax*plotH }

	colors := make([]string, len(t.Libs))
	np, no := 0, 0
	for j, l := range t.Libs {
		if ours(l) {
			colors[j] = oursColors[no%len(oursColors)]
			no++
		} else {
			colors[j] = peerColors[np%len(peerColors)]
			np++
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s (%s, medians; lower is faster)</text>`+"\n", left, esc(title), esc(metric))
	for v := 0.0; v <= yMax+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", left, left+len(t.Cases)*groupW, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, strconv.FormatFloat(v, 'g', 6, 64))
	}
	for i, c := range t.Cases {
		x0 := left + i*groupW + groupGap/2
		for j, l := range t.Libs {
			v := t.Median[i][j]
			if math.IsNaN(v) {
				continue
			}
			x := x0 + j*barW
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s" stroke="#757575" stroke-width="0.5"><title>%s %s: %s %s</title></rect>`+"\n",
				x, y(v), barW-2, y(0)-y(v), colors[j], esc(c), esc(l), num(v), esc(metric))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="8" text-anchor="start" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
				float64(x)+barW/2+2, y(v)-3, float64(x)+barW/2+2, y(v)-3, num(v))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x0+len(t.Libs)*barW/2, top+plotH+18, esc(c))
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="black"/>`+"\n", left, left+len(t.Cases)*groupW, top+plotH, top+plotH)
	lx := left + len(t.Cases)*groupW + 16
	for j, l := range t.Libs {
		ly := top + j*18
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", lx, ly, colors[j])
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+18, ly+10, esc(l))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// tick returns a step for the y axis of values up to maxV: 1, 2 or 5
// times a power of ten, giving 4 to 10 steps.
func tick(maxV float64) float64 {
	if maxV <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(maxV)))
	for _, m := range []float64{0.1, 0.2, 0.5, 1, 2, 5} {
		if maxV/(m*p) <= 10 {
			return m * p
		}
	}
	return 10 * p
}

func esc(s string) string { return html.EscapeString(s) }
