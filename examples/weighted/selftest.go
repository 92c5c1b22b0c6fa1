package main

import (
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/examples/internal/selftest"
)

// selfTest serves the app on a free loopback port and exports pages until
// the limit denies.
func selfTest() error {
	h, closeStore, err := newApp()
	if err != nil {
		return err
	}
	defer closeStore()
	return selftest.ServeHTTP(h, func(c *selftest.Client) error {
		for _, s := range []struct {
			pages  string
			status int
			rl     string // RateLimit must contain it
		}{
			{"30", http.StatusOK, `"pages";r=70;`},
			{"", http.StatusOK, `"pages";r=69;`}, // 1 page by default
			{"60", http.StatusOK, `"pages";r=9;`},
			{"10", http.StatusTooManyRequests, `"pages";r=9;`},
			{"9", http.StatusOK, `"pages";r=0;`},
			{"abc", http.StatusBadRequest, ""},
		} {
			r, err := c.Expect(s.status, "GET", "/export?pages="+s.pages, "")
			if err != nil {
				return err
			}
			if err := r.WantHeader("RateLimit", s.rl); err != nil {
				return err
			}
		}
		// More than the limit can ever hold: no Retry-After would be true.
		r, err := c.Expect(http.StatusTooManyRequests, "GET", "/export?pages=500", "")
		if err != nil {
			return err
		}
		if ra := r.Header.Get("Retry-After"); ra != "" {
			return fmt.Errorf("pages=500: Retry-After %q, want none", ra)
		}
		// Routes not wrapped are not limited, and get no headers.
		r, err = c.Do("GET", "/hello", "")
		if err != nil || r.Status != http.StatusOK || r.Header.Get("RateLimit") != "" {
			return fmt.Errorf("GET /hello: %d %q, %v; want 200 without RateLimit", r.Status, r.Header.Get("RateLimit"), err)
		}
		return nil
	})
}
