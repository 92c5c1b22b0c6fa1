package otellimit_test

import (
	"context"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/otellimit"
)

func Example() {
	reader := sdkmetric.NewManualReader() // in production, an exporter's reader
	obs, err := otellimit.New(otellimit.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		panic(err)
	}
	store := memstore.New()
	defer store.Close()
	clock := core.ClockFunc(func() time.Time { return time.Unix(1_700_006_400, 0) })
	lim, err := core.New(store, core.PerMinute(2).Named("per-minute"), core.WithName("api"),
		core.WithClock(clock), core.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	for range 3 {
		lim.Allow(context.Background(), "client-1")
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != "tollgate.decisions" {
			continue
		}
		allowed, denied := int64(0), int64(0)
		for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
			switch outcome, _ := p.Attributes.Value(otellimit.AttrOutcome); outcome.AsString() {
			case "allowed":
				allowed += p.Value
			case "denied":
				denied += p.Value
			}
		}
		fmt.Println(m.Name, m.Unit, "allowed:", allowed, "denied:", denied)
	}
	// Output:
	// tollgate.decisions {decision} allowed: 2 denied: 1
}
