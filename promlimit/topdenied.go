package promlimit

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/topk"
)

// A TopDenied is a prometheus.Collector of a topk.Tracker: how often the k
// most denied keys were denied, by rank, and all denials counted, over
// the tracker's last two windows (see topk). Ranks, not keys, are the
// labels: a key is often an IP, a user or an API key, and a label per key
// would be unbounded; the keys are on the tracker's own handler
// (topk.NewHandler). It is what an alert on a heavy hitter reads: one key
// taking most of the denials.
type TopDenied struct {
	t      *topk.Tracker
	k      int
	ranked *prometheus.Desc
	total  *prometheus.Desc
}

// NewTopDenied returns the collector of the k (at least 1) most denied
// keys of t; register it beside the Observer.
//
//	tollgate_top_denied{rank="1"}   denials of the most denied key
//	tollgate_top_denied_all         denials of every key
func NewTopDenied(t *topk.Tracker, k int) *TopDenied {
	return &TopDenied{t: t, k: max(k, 1),
		ranked: prometheus.NewDesc("tollgate_top_denied",
			"Denials of the rank-th most denied key over the top-k tracker's last two windows (an overestimate by at most the tracker's error bound).",
			[]string{"rank"}, nil),
		total: prometheus.NewDesc("tollgate_top_denied_all",
			"Denials of every key over the top-k tracker's last two windows.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *TopDenied) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.ranked
	ch <- c.total
}

// Collect implements prometheus.Collector.
func (c *TopDenied) Collect(ch chan<- prometheus.Metric) {
	s := c.t.Snapshot(c.k)
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.Total))
	for i, e := range s.Entries {
		ch <- prometheus.MustNewConstMetric(c.ranked, prometheus.GaugeValue, float64(e.Count), strconv.Itoa(i+1))
	}
}
