package main

import (
	"net/http"

	"github.com/tollgate/tollgate/examples/internal/selftest"
)

// selfTest serves the app on a free loopback port and checks that each
// request's headers reflect the real costs of the ones before it.
func selfTest() error {
	h, closeStores, err := newApp()
	if err != nil {
		return err
	}
	defer closeStores()
	return selftest.ServeHTTP(h, func(c *selftest.Client) error {
		for _, s := range []struct {
			method, path, body string
			status             int
			rl                 string // RateLimit must contain it
		}{
			// Admitted at 200 of 1000 (r=800); produces 20 tokens.
			{"POST", "/generate?max_tokens=200", "tell me a story", http.StatusOK, `"tokens";r=800;`},
			// 180 were refunded: 1000-20-100 = 880.
			{"POST", "/generate", "fail", http.StatusInternalServerError, `"tokens";r=880;`},
			// The failure was refunded in full: 1000-20-1000 = 0.
			{"POST", "/generate?max_tokens=1000", "", http.StatusTooManyRequests, `"tokens";r=980;`},
			{"POST", "/generate?max_tokens=980", "one two three", http.StatusOK, `"tokens";r=0;`},
			// 15 used: 1000-20-15-100 = 865.
			{"POST", "/generate", "hi", http.StatusOK, `"tokens";r=865;`},

			// Admitted at 1; each is then charged 300 more.
			{"GET", "/download/300", "", http.StatusOK, `"kib";r=1023;`},
			{"GET", "/download/300", "", http.StatusOK, `"kib";r=722;`},
			{"GET", "/download/300", "", http.StatusOK, `"kib";r=421;`},
			{"GET", "/download/300", "", http.StatusOK, `"kib";r=120;`},
			// 1204 KiB used of 1024: over quota until it is repaid.
			{"GET", "/download/0", "", http.StatusTooManyRequests, `"kib";r=0;`},
		} {
			r, err := c.Expect(s.status, s.method, s.path, s.body)
			if err != nil {
				return err
			}
			if err := r.WantHeader("RateLimit", s.rl); err != nil {
				return err
			}
		}
		return nil
	})
}
