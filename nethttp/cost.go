package nethttp

import (
	"net/http"

	"github.com/tollgate/tollgate/guard"
)

// ReportCost reports n as the real cost of r, the request the handler
// received from a middleware built with WithReportedCost: after the
// handler, the difference from the admitted cost is charged or refunded.
// It reports whether r has a cost slot; otherwise it does nothing. It is
// guard.ReportCost(r.Context(), n).
func ReportCost(r *http.Request, n int64) bool { return guard.ReportCost(r.Context(), n) }

// AddCost adds n to the real cost of r, starting from 0: see
// guard.AddCost. It is guard.AddCost(r.Context(), n).
func AddCost(r *http.Request, n int64) bool { return guard.AddCost(r.Context(), n) }
