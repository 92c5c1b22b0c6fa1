package promlimit_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate/tollgate/promlimit"
	"github.com/tollgate/tollgate/topk"
)

// The top denied keys show by rank, never by key, with the total.
func TestTopDenied(t *testing.T) {
	tr, err := topk.New()
	if err != nil {
		t.Fatal(err)
	}
	for range 7 {
		tr.Add("10.0.0.1", 1)
	}
	for range 2 {
		tr.Add("10.0.0.2", 1)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(promlimit.NewTopDenied(tr, 5))
	want := `
# HELP tollgate_top_denied Denials of the rank-th most denied key over the top-k tracker's last two windows (an overestimate by at most the tracker's error bound).
# TYPE tollgate_top_denied gauge
tollgate_top_denied{rank="1"} 7
tollgate_top_denied{rank="2"} 2
# HELP tollgate_top_denied_all Denials of every key over the top-k tracker's last two windows.
# TYPE tollgate_top_denied_all gauge
tollgate_top_denied_all 9
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
