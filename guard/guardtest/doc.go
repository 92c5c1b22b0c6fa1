// Package guardtest is the conformance suite of Tollgate's HTTP adapters:
// one table of requests (keys, costs, headers, statuses) that every
// adapter runs through Run, so that nethttp, gin, echo and fiber give the
// same statuses, headers and bodies. It also holds test doubles: a store
// that fails, one that hangs, and a fake clock.
//
// An adapter module tests itself with:
//
//	func TestConformance(t *testing.T) {
//		guardtest.Run(t, func(t *testing.T, cfg guardtest.Config) http.Handler {
//			r := gin.New()
//			r.Use(ginlimit.New(cfg.Limiter, cfg.Options...))
//			r.NoRoute(gin.WrapH(cfg.App))
//			return r
//		})
//	}
//
// Config.App replies as the request's query says (see App), so the same
// table covers refunds by status, reported costs and response sizes.
package guardtest
