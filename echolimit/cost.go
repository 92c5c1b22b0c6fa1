package echolimit

import (
	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/guard"
)

// ReportCost reports n as the real cost of the request of c, for a
// middleware built with WithReportedCost: after the handler, the
// difference from the admitted cost is charged or refunded. It reports
// whether the request has a cost slot; otherwise it does nothing. It is
// guard.ReportCost(c.Request().Context(), n).
func ReportCost(c echo.Context, n int64) bool { return guard.ReportCost(c.Request().Context(), n) }

// AddCost adds n to the real cost of the request of c, starting from 0:
// see guard.AddCost.
func AddCost(c echo.Context, n int64) bool { return guard.AddCost(c.Request().Context(), n) }
