// Package promlimit exports Tollgate's metrics to Prometheus: an Observer
// (core.Observer) that is also a prometheus.Collector.
//
//	obs, err := promlimit.New()
//	prometheus.MustRegister(obs) // or your registry
//	lim, err := core.New(store, core.PerMinute(100).Named("per-minute"),
//		core.WithName("api"), core.WithObserver(obs))
//	http.Handle("GET /metrics", promhttp.Handler())
//
// Give the same Observer to stores (memstore.WithObserver,
// redisstore.WithObserver) for their metrics.
//
// # Metrics
//
// Labels are bounded: a Limiter's name (core.WithName; give one, or it is
// a digest of the limits), a limit's name, an operation, an outcome, a
// store's name, a Redis Cluster node's address. Never the key.
//
//	tollgate_decisions_total{limiter, policy, operation, outcome}    counter
//	tollgate_cost_total{limiter, policy, operation, outcome}         counter, cost units asked for
//	tollgate_store_duration_seconds{limiter, operation}              histogram, each store call
//	tollgate_wait_seconds{limiter, policy}                           histogram, LeakyBucket waits
//	tollgate_breaker_state{limiter, part, state}                     gauge, 1 for the current state
//	tollgate_breaker_transitions_total{limiter, part, to}            counter
//	tollgate_keys{store}                                             gauge, memstore's keys
//	tollgate_evictions_total{store, lossy}                           counter
//	tollgate_store_failures_total{store}                             counter, failures no caller saw
//	tollgate_store_script_loads_total{store}                         counter, Redis
//	tollgate_store_compensations_total{store, result}                counter, Redis: undone, failed
//	tollgate_store_redirects_total{store}                            counter, Redis Cluster
//	tollgate_store_topology_reloads_total{store}                     counter, Redis Cluster
//	tollgate_adaptive_limit{limiter}                                 gauge, adaptive limit (package adaptive)
//	tollgate_adaptive_in_flight{limiter}                             gauge, its requests in flight
//	tollgate_adaptive_latency_seconds{limiter}                       gauge, its no-load latency estimate
//	tollgate_adaptive_shed_total{limiter}                            counter, requests it shed
//
// policy is the binding limit's name (the one that denied, or the closest
// to exhaustion); outcome is one of allowed, denied, dry_run_denied,
// failed_open, failed_closed, fallback_allowed, fallback_denied, invalid,
// error (core.Outcome). A denial rate per policy is
// rate(tollgate_decisions_total{outcome="denied"}[5m]); the store being
// down shows as failed_* and fallback_* outcomes, and as
// tollgate_breaker_state{state="open"} == 1.
//
// Observing a decision whose labels were seen before allocates nothing:
// the Observer keeps each combination's counters and histograms at hand
// (up to 4096 combinations).
package promlimit
