// Package nethttp is Tollgate's middleware for net/http: a
// func(http.Handler) http.Handler that works with the standard ServeMux,
// chi and anything else built on http.Handler.
//
//	lim, err := core.New(memstore.New(), core.PerMinute(100), core.PerHour(1000))
//	...
//	mux := http.NewServeMux()
//	mux.Handle("GET /items/{id}", item)
//	mux.Handle("POST /search", nethttp.New(searchLim, nethttp.WithCost(5))(search)) // per route
//	http.ListenAndServe(addr, nethttp.New(lim)(mux))                                // whole app
//
// The request flow, the headers and the 429 body are those of package
// guard; this package only translates *http.Request and
// http.ResponseWriter. Stacked middlewares (the whole app and a route's
// own, above) act as one decision: the handler's writer carries the
// request's guard.Chain to the middlewares further in, a gin or echo
// engine mounted inside included. Handlers report a post-hoc cost with
// guard.ReportCost(r.Context(), n) (see WithReportedCost).
//
// The writer the handler gets is pooled: as net/http requires, nothing
// may use it once the middleware has returned. A framework that writes
// through it later breaks that rule: echo's WrapMiddleware answers a
// handler's error after the wrapped middleware returned; in echo, use
// the echolimit module instead.
package nethttp
