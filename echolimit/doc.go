// Package echolimit is Tollgate's middleware for echo v4: an
// echo.MiddlewareFunc that works app-wide, on a group or on one route.
//
//	lim, err := core.New(memstore.New(), core.PerMinute(100), core.PerHour(1000))
//	...
//	e := echo.New()
//	e.Use(echolimit.New(lim))                                                  // whole app
//	e.POST("/search", search, echolimit.New(searchLim, echolimit.WithCost(5))) // one route
//	api := e.Group("/api", auth, echolimit.New(apiLim,                         // one group,
//		echolimit.WithKey(echolimit.Value("user"))))                           // per c.Get("user")
//
// or, in echo's configuration idiom:
//
//	e.Use(echolimit.NewWithConfig(echolimit.Config{
//		Skipper: func(c echo.Context) bool { return c.Path() == "/health" },
//		Limiter: lim,
//	}))
//
// The request flow, the headers and the 429 body are those of package
// guard, the same for every Tollgate adapter; this package only translates
// echo.Context into guard's request view and response writer. The
// rate-limit headers are set before the next handler runs. A denied
// request gets 429 with Retry-After and an application/problem+json body,
// unless WithDeniedHandler says otherwise (and may return an
// *echo.HTTPError for e.HTTPErrorHandler instead).
//
// # Keys and the trust model
//
// By default a request is keyed by its transport peer,
// c.Request().RemoteAddr, never by echo's c.RealIP() or Echo.IPExtractor:
// echo's default RealIP believes X-Forwarded-For and X-Real-IP from any
// client, which would let a client choose its own key and escape its
// limit, or spend someone else's. Behind a load balancer or reverse proxy,
// say which peers are trusted, and the forwarding header is read only from
// them:
//
//	echolimit.WithKey(keyfuncs.IP(keyfuncs.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))))
//
// (see package keyfuncs). Other keys: WithKeyFunc for a function over
// echo.Context, Value for a value an earlier middleware stored with
// c.Set, keyfuncs.Route for echo's route path (c.Path(), e.g.
// "/users/:id"; empty before routing, so register the middleware with Use,
// not Pre, and empty for a request that matched no route). A key
// function's error fails the request with a 4xx or 5xx (see
// guard.ErrorStatus), never lets it through unlimited; error text never
// reaches the client.
//
// # Several limits
//
// Tollgate middlewares stacked on one request (app-wide, group, route)
// act as one decision (see guard.Chain): a request one of them denies
// leaves no charge in the others, a limiter state is charged once per
// request however many of them apply it, and the headers list every
// policy the request is under, each once. Several limits on one Limiter,
// or WithRule (per IP and per user, say), decide within one middleware.
//
// # Settling after the handler
//
// WithRefundOn (refund, e.g., server errors) and WithResponseCost need the
// status that was sent. Echo handlers return errors that e.HTTPErrorHandler
// turns into a response later, so with these options the middleware
// commits a handler's error itself, with c.Error(err), as echo's Logger
// middleware does, reads c.Response().Status and Size, and returns nil to
// the middleware around it. Without them, the handler's error is returned
// unchanged.
//
// With WithReportedCost, handlers report the real cost of a request after
// the fact, with ReportCost(c, n) or guard.ReportCost on
// c.Request().Context(): the middleware hands on a request whose context
// carries the cost slot (c.SetRequest), so handlers wrapped with
// echo.WrapHandler report too.
package echolimit
