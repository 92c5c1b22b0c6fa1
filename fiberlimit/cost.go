package fiberlimit

import (
	"github.com/gofiber/fiber/v2"

	"github.com/tollgate/tollgate/guard"
)

// ReportCost reports n as the real cost of the request of c, known only
// once the handler ran (tokens generated, rows scanned), for a middleware
// built with WithReportedCost: after the handler, the middleware charges or
// refunds the difference from the cost it admitted. It is shorthand for
// guard.ReportCost(c.UserContext(), n), and reports whether c belongs to
// such a middleware; otherwise it does nothing. Call it before the handler
// returns; a negative n counts as 0.
func ReportCost(c *fiber.Ctx, n int64) bool { return guard.ReportCost(c.UserContext(), n) }

// AddCost adds n to the real cost of the request of c, for handlers that
// count as they go: the first call starts from 0, not from the admitted
// cost. It is shorthand for guard.AddCost(c.UserContext(), n).
func AddCost(c *fiber.Ctx, n int64) bool { return guard.AddCost(c.UserContext(), n) }
