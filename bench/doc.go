// Package bench compares Tollgate's decisions with those of other Go rate
// limiters, side by side in one go test -bench run, so that benchstat can put
// each case's libraries in one table:
//
//	go test -run='^$' -bench='^BenchmarkMemory$' -benchmem -count=6 . | tee mem.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /lib mem.txt
//
// It is its own module so that the peers it imports never become
// dependencies of github.com/tollgate/tollgate; the replace directives in
// go.mod point it at the working tree.
//
// The package has no API: everything lives in _test.go files.
//
//   - memory_test.go: BenchmarkMemory, in-memory decisions on an existing
//     key, named case=…/lib=… (hot key, 10k keys round robin, RunParallel
//     over 100k keys; each allowed under a limit of 1e8/s and of 1e9/hour,
//     whose Burst × Period passes 2^47 µs, and denied under 1/hour and
//     5/s), reporting cpu-ns/op besides ns/op (cputime_*_test.go).
//   - paired_test.go: BenchmarkMemoryPaired, BenchmarkMemory's cases with
//     the libraries taking turns in batches of 10,000 decisions, so that a
//     busy machine's slow and fast stretches fall on all of them alike;
//     it reports each library's ns/op (wall time only) and the fastest
//     peer's ÷ Tollgate's.
//   - peers_test.go, tollgate_test.go: each library set up the way its
//     users write it.
//   - keys_test.go: key sets, checked to be distinct.
//   - crosscheck_test.go: Tollgate's token bucket against x/time/rate over a
//     randomized trace of fixed instants.
//   - plot/: a command that turns BenchmarkMemory's output into the bar
//     chart memory.svg (medians per library per case) and a Markdown table
//     of the same medians.
//   - redis_test.go: BenchmarkRedis, decisions per second on a local
//     redis-server (TOLLGATE_REDIS_ADDR) against go-redis/redis_rate,
//     ulule/limiter, one PING per decision and a floor script (TIME, GET
//     and SET, deciding nothing), at 1 and 64 callers, with the server's
//     commands, reads and CPU time per decision; BenchmarkRedisLone and
//     BenchmarkRedis64, the same libraries taking turns in one process,
//     so that they share the load of a busy machine.
//   - floor_test.go: floors, the least a limiter does per decision (an
//     exact clock read, a map, one state updated under a mutex or by
//     compare-and-swap) and per request of a net/http middleware with
//     draft-11 headers: BenchmarkMemoryFloor runs BenchmarkMemory's cases
//     for them beside the fastest peers, and BenchmarkHTTP has one.
//   - http_test.go: BenchmarkHTTP, the net/http middleware against
//     go-chi/httprate, the floor and the bare handler.
package bench
