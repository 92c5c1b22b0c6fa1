// Package ginlimit is Tollgate's rate-limiting middleware for gin: a
// gin.HandlerFunc that works app-wide, on a group or on a single route.
//
//	lim, err := core.New(memstore.New(), core.PerMinute(100), core.PerHour(1000))
//	...
//	r := gin.New()
//	r.Use(ginlimit.New(lim))                                                 // whole app, per client IP
//	r.POST("/search", ginlimit.New(searchLim, ginlimit.WithCost(5)), search) // a costly route
//	api := r.Group("/api", ginlimit.New(apiLim, ginlimit.WithKeyFunc(         // a group, per user
//		func(c *gin.Context) (string, error) { return c.GetString("user"), nil })))
//
// The request flow, the headers and the 429 body are those of package
// guard, identical in every Tollgate adapter; this package only
// translates *gin.Context. The rate-limit headers (draft-11 RateLimit and
// RateLimit-Policy by default) are set before the rest of the chain runs.
// A denied request gets 429 with Retry-After and an application/problem+json
// body and the chain is aborted (c.Abort): no later middleware or handler
// runs, and middleware before this one sees c.IsAborted(). A request that
// cannot be decided (a missing key, a failing store) gets a generic error
// response, 400 or 503 (guard.ErrorStatus), whose body never carries the
// error's text; log it with WithOnError.
//
// # Keys and the trust model
//
// The default key is keyfuncs.IP(): the transport peer, c.Request.RemoteAddr,
// with forwarding headers ignored, since any client can write them. Behind
// a reverse proxy or load balancer, say which peers are trusted, and which
// header they set, in the key function itself:
//
//	ginlimit.WithKey(keyfuncs.IP(keyfuncs.TrustPrivate()))              // X-Forwarded-For, right to left
//	ginlimit.WithKey(keyfuncs.IP(trusted, keyfuncs.FromHeader("CF-Connecting-IP")))
//
// gin's own client-address machinery (c.ClientIP(), engine.SetTrustedProxies,
// engine.TrustedPlatform, engine.ForwardedByClientIP, RemoteIPHeaders) is not
// used: its defaults trust every proxy, and a header such as
// CF-Connecting-IP named by TrustedPlatform is believed whoever sends it,
// so a client could choose its own key. keyfuncs.IP reads a forwarding
// header only when the peer is inside a trusted prefix, and reads
// X-Forwarded-For right to left, skipping trusted hops.
//
// Other keys come from keyfuncs (Header, Query, Route, Join, Static...),
// given to WithKey and WithRule, or from a func(*gin.Context) (string,
// error), given to WithKeyFunc as is, or to WithRule through KeyFunc.
// keyfuncs.Route is c.FullPath(), e.g. "/users/:id":
// one key per route whatever its parameters; it is empty under NoRoute and
// NoMethod, where a Route key fails the request with 400 unless wrapped in
// guard.Optional. A value an authentication middleware stored with c.Set
// is read with c.GetString in a gin key function: keyfuncs.ContextValue
// reads c.Request.Context(), which c.Set does not touch.
//
// # Costs
//
// A request costs 1 unless WithCost or WithCostFunc say otherwise. A
// handler that learns its real cost only as it runs (tokens generated,
// rows scanned) reports it with ReportCost(c, n), under WithReportedCost;
// after the chain the middleware charges or refunds the difference.
// WithRefundOn and WithResponseCost settle from c.Writer.Status() and
// c.Writer.Size() instead. A LeakyBucket limit makes a request wait its
// turn (up to WithMaxDelay), cancelled with c.Request.Context().
//
// # Options
//
// Option is guard.Option: every option of package guard works here, and
// the options of this package are the same ones, or their translations to
// *gin.Context. Context returns the *gin.Context behind the
// keyfuncs.Request that functions written against package guard receive.
package ginlimit
