package echolimit

import (
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
)

// Config configures the middleware in echo's idiom, for NewWithConfig:
//
//	e.Use(echolimit.NewWithConfig(echolimit.Config{
//		Skipper: func(c echo.Context) bool { return c.Path() == "/health" },
//		Limiter: lim,
//		KeyFunc: func(c echo.Context) (string, error) { return c.Param("tenant"), nil },
//	}))
//
// A zero field takes its default; each field is the option of the same
// name, and Options holds the rest.
type Config struct {
	// Skipper defines a function to skip the middleware: a skipped request
	// is not limited, not counted and gets no rate-limit headers.
	// Default: middleware.DefaultSkipper, which skips nothing.
	Skipper middleware.Skipper

	// Limiter limits the requests. Required.
	Limiter *core.Limiter

	// KeyFunc returns the key of a request: who is limited (see
	// WithKeyFunc). Default: keyfuncs.IP(), the peer address.
	KeyFunc func(c echo.Context) (string, error)

	// Cost is the static cost of every request, in cost units; 0 means
	// the default (a free request needs a CostFunc that returns 0).
	// Default: 1.
	Cost int64

	// CostFunc computes the cost of each request, replacing Cost (see
	// WithCostFunc). Default: nil.
	CostFunc func(c echo.Context) (int64, error)

	// DeniedHandler answers a denied request (see WithDeniedHandler).
	// Default: 429 with a problem+json body.
	DeniedHandler func(c echo.Context, d *guard.Denial) error

	// ErrorHandler answers a request that cannot be decided (see
	// WithErrorHandler). Default: guard.ErrorStatus with a generic
	// problem+json body.
	ErrorHandler func(c echo.Context, err error) error

	// Headers selects the rate-limit headers. Default:
	// guard.HeadersDraft11.
	Headers guard.HeaderStyle

	// DryRun decides, counts and sets headers but never blocks (see
	// guard.WithDryRun). Default: false.
	DryRun bool

	// Options are further options (WithRule, WithRefundOn,
	// WithReportedCost, ...), applied after the fields above, so they
	// override them. Default: none.
	Options []Option
}

// NewWithConfig returns the middleware New(cfg.Limiter, ...) with the
// options of cfg. Like New, it panics if cfg.Limiter is nil or an option is
// invalid: programmer errors.
func NewWithConfig(cfg Config) echo.MiddlewareFunc {
	if cfg.Limiter == nil {
		panic("echolimit: NewWithConfig: nil Config.Limiter")
	}
	opts := make([]Option, 0, 8+len(cfg.Options))
	if cfg.Skipper != nil {
		opts = append(opts, WithSkipper(cfg.Skipper))
	}
	if cfg.KeyFunc != nil {
		opts = append(opts, WithKeyFunc(cfg.KeyFunc))
	}
	if cfg.Cost != 0 {
		opts = append(opts, WithCost(cfg.Cost))
	}
	if cfg.CostFunc != nil {
		opts = append(opts, WithCostFunc(cfg.CostFunc))
	}
	if cfg.DeniedHandler != nil {
		opts = append(opts, WithDeniedHandler(cfg.DeniedHandler))
	}
	if cfg.ErrorHandler != nil {
		opts = append(opts, WithErrorHandler(cfg.ErrorHandler))
	}
	opts = append(opts, WithHeaders(cfg.Headers), WithDryRun(cfg.DryRun))
	opts = append(opts, cfg.Options...)
	return New(cfg.Limiter, opts...)
}
