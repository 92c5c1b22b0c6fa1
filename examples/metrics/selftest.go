package main

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/examples/internal/selftest"
)

// selfTest serves the app on a free loopback port, sends a burst that
// passes the per-second limit, and checks what /metrics reports.
func selfTest(redisAddr string) error {
	h, closeStores, err := newApp(prometheus.NewRegistry(), redisAddr)
	if err != nil {
		return err
	}
	defer closeStores()
	return selftest.ServeHTTP(h, func(c *selftest.Client) error {
		for range 15 {
			if _, err := c.Do("GET", "/hello", "", "X-Client", "heavy"); err != nil {
				return err
			}
		}
		r, err := c.Do("GET", "/metrics", "")
		if err != nil {
			return err
		}
		for _, want := range []string{
			`tollgate_decisions_total{limiter="api",operation="take",outcome="allowed",policy="per-second"} 10`,
			`tollgate_decisions_total{limiter="api",operation="take",outcome="denied",policy="per-second"} 5`,
			`tollgate_top_denied{rank="1"} 5`,
			`tollgate_store_duration_seconds_count{limiter="api",operation="take"}`,
		} {
			if !strings.Contains(r.Body, want) {
				return fmt.Errorf("/metrics lacks %q:\n%s", want, grep(r.Body, "tollgate_"))
			}
		}
		return nil
	})
}

func grep(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
