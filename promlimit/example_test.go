package promlimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/promlimit"
)

func Example() {
	obs, err := promlimit.New()
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)

	clock := core.ClockFunc(func() time.Time { return time.Unix(1_700_006_400, 0) })
	store := memstore.New(memstore.WithObserver(obs))
	defer store.Close()
	lim, err := core.New(store, core.PerMinute(2).Named("per-minute"), core.WithName("api"),
		core.WithClock(clock), core.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	for range 3 {
		lim.Allow(context.Background(), "client-1")
	}

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		if f.GetName() != "tollgate_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			fmt.Print(f.GetName(), "{")
			for i, l := range m.GetLabel() {
				if i > 0 {
					fmt.Print(",")
				}
				fmt.Printf("%s=%q", l.GetName(), l.GetValue())
			}
			fmt.Println("}", m.GetCounter().GetValue())
		}
	}
	// Output:
	// tollgate_decisions_total{limiter="api",operation="take",outcome="allowed",policy="per-minute"} 2
	// tollgate_decisions_total{limiter="api",operation="take",outcome="denied",policy="per-minute"} 1
}
