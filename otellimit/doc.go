// Package otellimit records Tollgate's metrics through the OpenTelemetry
// metric API and adds each decision to the request's span: an Observer
// (core.Observer) for Limiters (core.WithObserver) and stores
// (memstore.WithObserver, redisstore.WithObserver).
//
//	obs, err := otellimit.New() // the global MeterProvider, or WithMeterProvider
//	lim, err := core.New(store, core.PerMinute(100).Named("per-minute"),
//		core.WithName("api"), core.WithObserver(obs))
//
// # Metrics
//
// Instrument names and units follow the semantic conventions' style;
// attributes are bounded (a Limiter's name, a limit's name, an operation,
// an outcome, a store's name, a Redis Cluster node's address), never the
// key:
//
//	tollgate.decisions              counter   {decision}   ratelimit.limiter, .policy, .operation, .outcome
//	tollgate.cost                   counter   {unit}       the same
//	tollgate.store.duration         histogram s            ratelimit.limiter, .operation
//	tollgate.wait.duration          histogram s            ratelimit.limiter, .policy (LeakyBucket waits)
//	tollgate.breaker.state          gauge     1            ratelimit.limiter, .part, .breaker.state: 1 for the current state
//	tollgate.breaker.transitions    counter   {transition} ratelimit.limiter, .part, .breaker.state (entered)
//	tollgate.store.keys             gauge     {key}        ratelimit.store
//	tollgate.store.evictions        counter   {key}        ratelimit.store, .eviction.lossy
//	tollgate.store.failures         counter   {failure}    ratelimit.store: failures no caller saw
//	tollgate.store.script_loads     counter   {load}       ratelimit.store (Redis)
//	tollgate.store.compensations    counter   {operation}  ratelimit.store, .compensation.result: undone, failed
//	tollgate.store.redirects        counter   {operation}  ratelimit.store (Redis Cluster)
//	tollgate.store.topology_reloads counter   {reload}     ratelimit.store (Redis Cluster)
//	tollgate.adaptive.limit         gauge     {request}    ratelimit.limiter (package adaptive)
//	tollgate.adaptive.in_flight     gauge     {request}    ratelimit.limiter
//	tollgate.adaptive.latency       gauge     s            ratelimit.limiter: the no-load latency estimate
//	tollgate.adaptive.shed          counter   {request}    ratelimit.limiter: requests shed
//
// ratelimit.outcome is one of allowed, denied, dry_run_denied,
// failed_open, failed_closed, fallback_allowed, fallback_denied, invalid,
// error (core.Outcome).
//
// # Traces
//
// A decision made under a context whose span records (the request's
// span, from your HTTP instrumentation) adds a span event
// ratelimit.decision with ratelimit.limiter, ratelimit.policy,
// ratelimit.operation, ratelimit.outcome, ratelimit.cost,
// ratelimit.remaining, and when denied ratelimit.retry_after (seconds),
// when queued ratelimit.wait (seconds); ratelimit.key only with
// WithKey(true). A circuit breaker's transition caused by the request adds
// ratelimit.breaker (ratelimit.breaker.from, ratelimit.breaker.state).
//
// Observing a decision whose attributes were seen before allocates nothing
// in this package: the Observer keeps each combination's attribute set at
// hand (up to 4096 combinations). Without a recording span, the trace part
// costs one check.
package otellimit
