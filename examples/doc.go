// Package examples holds runnable Tollgate programs, each a package main in
// its own directory, small enough to copy:
//
//	quickstart/nethttp   net/http: an app-wide limit per client IP, a costly route (cost 5, own limiter)
//	quickstart/chi       the same with chi, through the net/http middleware
//	quickstart/gin       the same with gin (ginlimit)
//	quickstart/echo      the same with echo v4 (echolimit)
//	quickstart/fiber     the same with fiber v2 (fiberlimit)
//	grpc                 the same for a gRPC server (grpclimit), a stream, and a client: go run ./grpc -call ADDR
//	redis                the quickstart's limits on Redis, with a fallback while Redis is down
//	tiers                limits by plan (free, pro) with core.WithLimitsFunc, keyed by account
//	weighted             a cost computed from the request: ?pages=N costs N
//	posthoc              costs known afterwards: tokens reported by the handler, response bytes
//	rulesfile            every limit, key and route from a rules file, reloaded while serving
//
// Each serves on -addr (or $ADDR; default 127.0.0.1:8080, and
// 127.0.0.1:50051 for grpc):
//
//	go run ./quickstart/gin
//	go run ./redis -redis 127.0.0.1:6379
//
// and checks itself with -selftest: it serves on a free loopback port,
// sends a few requests, checks the statuses and headers, and exits 0.
// go test ./... runs every selftest, in process (each directory's
// main_test.go) and as built binaries (examples_test.go); the Redis one
// needs TOLLGATE_REDIS_ADDR, and is skipped without it unless
// TOLLGATE_REQUIRE_REDIS=1.
package examples
