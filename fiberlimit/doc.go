// Package fiberlimit is Tollgate's rate-limiting middleware for fiber v2: a
// fiber.Handler for app.Use, a group, or a single route.
//
//	lim, err := core.New(memstore.New(), core.PerMinute(100), core.PerHour(1000))
//	...
//	app := fiber.New()
//	app.Use(fiberlimit.New(lim,                                       // whole app
//		fiberlimit.WithNext(func(c *fiber.Ctx) bool { return c.Path() == "/health" })))
//	app.Post("/search", fiberlimit.New(searchLim, fiberlimit.WithCost(5)), search) // one route
//	api := app.Group("/api", fiberlimit.New(apiLim,                   // one group, per user
//		fiberlimit.WithKey(fiberlimit.Locals("user"))))
//
// The request flow, the headers and the 429 body are those of package
// guard; this package only translates *fiber.Ctx, so fiberlimit answers as
// the net/http, gin and echo adapters do, header for header. Options are
// guard.Options: the fiber-typed ones (WithKeyFunc, WithCostFunc, WithNext,
// WithDeniedHandler, WithErrorHandler, WithOnDenied, WithOnError) take
// functions over *fiber.Ctx. There is no Config struct: the limiter is
// required, and a struct's zero value could not tell a cost of 0 from an
// unset one; WithNext is fiber's Config.Next.
//
// # Keys
//
// Any keyfuncs.Func works (WithKey, WithRule); KeyFunc and WithKeyFunc take
// a function over *fiber.Ctx, and Locals keys on a value an authentication
// middleware stored with c.Locals:
//
//	fiberlimit.WithKey(fiberlimit.Locals("user"))
//	fiberlimit.WithKeyFunc(func(c *fiber.Ctx) (string, error) { return c.Params("tenant"), nil })
//
// keyfuncs.Route is the pattern of the route the middleware is mounted on
// (c.Route().Path, e.g. "/users/:id"). Middleware added with app.Use or to
// a group runs before fiber has picked the route that will answer, so
// there Route is the Use or group prefix ("/", "/api"): one key for all
// the routes below it. Mount the middleware on each route to key per
// route.
//
// # The fasthttp lifetime rule
//
// fiber hands out strings (c.Get, c.Params, c.Query, c.Path, c.Method) that
// point into fasthttp's request buffers, which are reused for the next
// request as soon as the handler returns. A rate-limit key outlives the
// handler: a store may keep it (a Redis batch flushed later, a map entry),
// a hook may log it from a goroutine, a DeniedHandler may keep Denial.Key.
// So this package copies every string it takes from the request before a
// key function sees it, and copies the key of WithKeyFunc, KeyFunc and
// Locals: every key, Denial.Key included, may be kept. A keyfuncs.Func
// written over Ctx(r) by hand must do the same (strings.Clone).
//
// # Client addresses and trust
//
// The default key, keyfuncs.IP(), is the transport peer's address
// (c.Context().RemoteAddr(), which the middleware hands to it as a
// netip.AddrPort: see keyfuncs.PeerAddrRequest), never a header. fiber's own proxy settings
// (Config.ProxyHeader, EnableTrustedProxyCheck, TrustedProxies) drive
// c.IP(); they are not consulted here, and keying on c.IP() with
// ProxyHeader set trusts a header any client can write. Behind proxies,
// say which ones are trusted:
//
//	fiberlimit.WithKey(keyfuncs.IP(keyfuncs.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))))
//
// and X-Forwarded-For or Forwarded is read, right to left, only from a
// trusted peer (see package keyfuncs).
//
// # Context, errors and settling
//
// The request's context is c.UserContext(): store calls and LeakyBucket
// waits end with it, and handlers report a post-hoc cost on it
// (ReportCost(c, n), or guard.ReportCost(c.UserContext(), n)). fasthttp
// does not cancel anything when a client goes away, so put a timeout
// middleware that sets a deadline on the user context (fiber's
// timeout.NewWithContext) in front of fiberlimit to bound them by more than
// WithMaxDelay and the store's own timeouts.
//
// The next handler's error is returned unchanged, for the app's
// ErrorHandler. With WithRefundOn or WithResponseCost, which settle on the
// status actually sent, the error is committed through the app's
// ErrorHandler first, as fiber's logger middleware does, so that a
// returned fiber.ErrServiceUnavailable is settled as a 503. Errors of the
// limiter itself (a failing store, a key function's error) are answered
// with a generic body; their text never reaches the client.
//
// A panic in a function given to an option (a key, cost or Next function,
// a handler, a hook) propagates, as a panic in any fiber handler does,
// after the middleware has refunded what its rules took for the request.
// fiber does not recover panics by itself: like any fiber application,
// use its recover middleware (app.Use(recover.New()), before fiberlimit),
// or a panic ends the process.
package fiberlimit
