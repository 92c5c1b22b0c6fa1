package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// report writes the Markdown table of every outcome.
func report(w io.Writer, m model, all []*outcome, unloaded time.Duration, targets []string, fixed int64, took time.Duration) {
	by := map[string]map[string]*outcome{}
	for _, o := range all {
		if by[o.sc.name] == nil {
			by[o.sc.name] = map[string]*outcome{}
		}
		by[o.sc.name][o.target] = o
	}
	capa := m.capacity()
	fmt.Fprintf(w, "Backend: %d slots, median service %v (log-normal σ 0.52), capacity %.0f req/s, unloaded p99 %v; "+
		"client deadline %v; time scale %g; fixed = core.InFlight(%d, 5s); run took %v.\n\n",
		m.slots, m.median, capa, unloaded.Round(100*time.Microsecond), m.deadline, m.scale, fixed, took.Round(time.Second))
	fmt.Fprintf(w, "| scenario | figure | %s | target |\n", strings.Join(targets, " | "))
	fmt.Fprintf(w, "|---|---|%s---|\n", strings.Repeat("---|", len(targets)))
	row := func(sc, figure, target string, cell func(o *outcome) string) {
		if by[sc] == nil {
			return
		}
		cells := make([]string, len(targets))
		for i, t := range targets {
			if o := by[sc][t]; o != nil {
				cells[i] = cell(o)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", sc, figure, strings.Join(cells, " | "), target)
	}
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
	ms := func(d time.Duration) string {
		if d < 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f ms (%.1f×)", float64(d)/1e6, float64(d)/float64(unloaded))
	}
	secs := func(d time.Duration) string {
		if d < 0 {
			return "never"
		}
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	limit := func(o *outcome, from, to time.Duration) string {
		l := o.meanLimit(from, to)
		if l < 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f", l)
	}
	row("overload", "goodput (of capacity)", "≥ 90%", func(o *outcome) string { return pct(o.goodput() / capa) })
	row("overload", "p99 of served (× unloaded)", "≤ 2×", func(o *outcome) string { return ms(o.p99()) })
	row("overload", "shed", "", func(o *outcome) string { return pct(o.shedShare()) })
	row("overload", "mean limit", "", func(o *outcome) string { return limit(o, 2*time.Second, o.sc.duration) })
	row("light", "shed", "≤ 0.1%", func(o *outcome) string { return fmt.Sprintf("%.2f%%", 100*o.shedShare()) })
	row("light", "p99 of served (× unloaded)", "", func(o *outcome) string { return ms(o.p99()) })
	if h := by["halves"]; h != nil && len(h[targets[0]].sc.phases) == 2 {
		half, back := h[targets[0]].sc.phases[0], h[targets[0]].sc.phases[1]
		row("halves", "settles after capacity halves", "", func(o *outcome) string {
			return secs(o.settleAfter(half, back, capa/2, unloaded))
		})
		row("halves", "settles after it returns", "", func(o *outcome) string {
			return secs(o.settleAfter(back, o.sc.duration, capa, unloaded))
		})
		row("halves", "limit: full → half", "", func(o *outcome) string {
			return limit(o, half-5*time.Second, half) + " → " + limit(o, back-5*time.Second, back)
		})
		row("halves", "limit follows (within 20% of the half level)", "≤ 5 s", func(o *outcome) string {
			low := o.meanLimit(back-5*time.Second, back)
			full := o.meanLimit(half-5*time.Second, half)
			if low < 0 || low > 0.8*full {
				return "never"
			}
			return secs(o.reached(half, back, func(l float64) bool { return l <= 1.2*low }))
		})
		row("halves", "limit recovers (within 20% of the full level)", "≤ 10 s", func(o *outcome) string {
			full := o.meanLimit(half-5*time.Second, half)
			if full < 0 {
				return "—"
			}
			return secs(o.reached(back, o.sc.duration, func(l float64) bool { return l >= 0.8*full }))
		})
	}
	row("priorities", "critical served", "≥ 99%", func(o *outcome) string { return fmt.Sprintf("%.2f%%", 100*o.criticalServed()) })
	row("priorities", "goodput (of capacity)", "", func(o *outcome) string { return pct(o.goodput() / capa) })
	row("disconnects", "mean limit vs without (overload)", "within ±10%", func(o *outcome) string {
		without := by["overload"][o.target]
		if without == nil {
			return "—"
		}
		a, b := o.meanLimit(2*time.Second, o.sc.duration), without.meanLimit(2*time.Second, without.sc.duration)
		if a < 0 || b <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f vs %.1f (%+.1f%%)", a, b, 100*(a/b-1))
	})
	row("disconnects", "goodput (of capacity)", "", func(o *outcome) string { return pct(o.goodput() / capa) })
}
