package main

import (
	"net/http"

	"github.com/tollgate/tollgate/examples/internal/selftest"
)

// selfTest serves the app on a free loopback port: a free account is held
// to 10 per second, a pro account is not, and unknown keys get 401.
func selfTest() error {
	h, closeStore, err := newApp()
	if err != nil {
		return err
	}
	defer closeStore()
	return selftest.ServeHTTP(h, func(c *selftest.Client) error {
		free := []string{"Authorization", "Bearer free-key"}
		pro := []string{"Authorization", "Bearer pro-key"}
		if _, err := c.Expect(http.StatusUnauthorized, "GET", "/hello", ""); err != nil {
			return err
		}
		if _, err := c.Expect(http.StatusUnauthorized, "GET", "/hello", "", "Authorization", "Bearer nope"); err != nil {
			return err
		}
		r, err := c.Expect(http.StatusOK, "GET", "/hello", "", free...)
		if err != nil {
			return err
		}
		if err := r.WantHeader("RateLimit-Policy", `"free-per-second";q=10;w=1, "free-per-minute";q=100;w=60`); err != nil {
			return err
		}
		if r, err = c.Burst(20, "GET", "/hello", "", free...); err != nil {
			return err
		}
		if err := r.WantHeader("RateLimit", `"free-per-second";r=0;`); err != nil {
			return err
		}
		// The pro account passes 20 at once, and sees its own policies.
		for range 20 {
			if r, err = c.Expect(http.StatusOK, "GET", "/hello", "", pro...); err != nil {
				return err
			}
		}
		if err := r.WantHeader("RateLimit-Policy", `"pro-per-second";q=100;w=1, "pro-per-minute";q=5000;w=60`); err != nil {
			return err
		}
		return r.WantHeader("RateLimit", `"pro-per-second";r=8`) // 80, or a little more if a second began meanwhile
	})
}
