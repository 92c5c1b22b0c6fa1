package main

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/platinummonkey/go-concurrency-limits/core"
	"github.com/platinummonkey/go-concurrency-limits/limit"
	"github.com/platinummonkey/go-concurrency-limits/limiter"
	"github.com/platinummonkey/go-concurrency-limits/strategy"

	"github.com/tollgate/tollgate/adaptive"
	tcore "github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/keyfuncs"
	"github.com/tollgate/tollgate/nethttp"
)

// A target is one way to protect the backend, set up fresh per scenario.
type target struct {
	wrap  func(http.Handler) http.Handler
	limit func() float64 // the current limit; nil: none
	close func()
}

// targetNames are the targets compared, in table order.
var targetNames = []string{"adaptive", "none", "fixed", "peer"}

// priorityHeader marks a sheddable request.
const priorityHeader = "X-Priority"

// newTarget sets up the target called name. fixed is the InFlight limit
// of "fixed".
func newTarget(name string, fixed int64) (*target, error) {
	switch name {
	case "adaptive":
		lim, err := adaptive.New(adaptive.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return nil, err
		}
		mw := nethttp.New(nil, nethttp.WithAdaptive(lim), nethttp.WithPriority(func(r *http.Request) adaptive.Priority {
			if r.Header.Get(priorityHeader) == "sheddable" {
				return adaptive.Sheddable
			}
			return adaptive.Critical
		}))
		return &target{wrap: mw, limit: func() float64 { return float64(lim.Stats().Limit) }, close: func() {}}, nil
	case "none":
		return &target{wrap: func(h http.Handler) http.Handler { return h }, close: func() {}}, nil
	case "fixed":
		st := memstore.New()
		lim, err := tcore.New(st, tcore.InFlight(fixed, 5*time.Second))
		if err != nil {
			return nil, err
		}
		mw := nethttp.New(lim, nethttp.WithKey(keyfuncs.Static("all")))
		return &target{wrap: mw, limit: func() float64 { return float64(fixed) }, close: func() { st.Close() }}, nil
	case "peer":
		// go-concurrency-limits as its README sets it up: the default
		// limiter (Vegas) with a simple strategy.
		pl, err := limiter.NewDefaultLimiterWithDefaults("sim", strategy.NewSimpleStrategy(20),
			limit.NoopLimitLogger{}, core.EmptyMetricRegistryInstance)
		if err != nil {
			return nil, err
		}
		mw := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				l, ok := pl.Acquire(r.Context())
				if !ok {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				next.ServeHTTP(w, r)
				if r.Context().Err() != nil {
					l.OnIgnore() // the client went away: no sample
				} else {
					l.OnSuccess()
				}
			})
		}
		return &target{wrap: mw, limit: func() float64 { return float64(pl.EstimatedLimit()) }, close: func() {}}, nil
	}
	return nil, errUnknownTarget
}
