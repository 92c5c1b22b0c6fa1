// Package guardtest is the conformance suite of Tollgate's HTTP adapters:
// one table of requests (keys, costs, headers, statuses) that every
// adapter runs through Run, so that nethttp, gin, echo and fiber give the
// same statuses, headers and bodies. It also holds test doubles: a store
// that fails, one that hangs, and a fake clock.
//
// An adapter module tests itself with a build function that mounts the
// middlewares of Config.Layers, app-wide, on the group GroupPrefix and on
// the route RoutePath, in front of Config.App:
//
//	func TestConformance(t *testing.T) {
//		guardtest.RunKnownRoutes(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
//			r := gin.New()
//			r.Use(mws(cfg.In(guardtest.AppWide))...)
//			g := r.Group(guardtest.GroupPrefix, mws(cfg.In(guardtest.Grouped))...)
//			g.Any("/search", append(mws(cfg.In(guardtest.OnRoute)), gin.WrapH(cfg.App))...)
//			g.Any("/list", gin.WrapH(cfg.App))
//			r.NoRoute(gin.WrapH(cfg.App))
//			return r
//		})
//	}
//
// (Run, for adapters whose app-wide middleware does not know the route
// before it runs.) Config.App replies as the request's query says (see
// App), so the same table covers refunds by status, reported costs and
// response sizes; stacked cases check the state of every limiter after
// each request too.
package guardtest
