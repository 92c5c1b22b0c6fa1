package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate/tollgate/examples/internal/selftest"
)

// selfTest serves the app from a copy of the built-in rules in a
// temporary file, checks each route, then edits the file and reloads it:
// a raised limit keeps the usage already counted, and a file with a
// mistake leaves the running rules in place.
func selfTest() error {
	dir, err := os.MkdirTemp("", "rulesfile")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, builtin, 0o600); err != nil {
		return err
	}
	h, set, closeApp, err := newApp(path)
	if err != nil {
		return err
	}
	defer closeApp()
	edit := func(old, new string) error {
		if !bytes.Contains(builtin, []byte(old)) {
			return fmt.Errorf("rules.yaml lacks %q", old)
		}
		return os.WriteFile(path, bytes.Replace(builtin, []byte(old), []byte(new), 1), 0o600)
	}
	return selftest.ServeHTTP(h, func(c *selftest.Client) error {
		r, err := c.Expect(http.StatusOK, "GET", "/hello", "")
		if err != nil {
			return err
		}
		if err := r.WantHeader("RateLimit-Policy", `"60-per-1m";q=60;w=60, "1000-per-1h";q=1000;w=3600`); err != nil {
			return err
		}
		for range 5 {
			r, err := c.Do("GET", "/healthz", "")
			switch {
			case err != nil:
				return err
			case r.Status != http.StatusOK || r.Header.Get("RateLimit-Policy") != "":
				return fmt.Errorf("GET /healthz = %d with RateLimit-Policy %q, want 200 unlimited", r.Status, r.Header.Get("RateLimit-Policy"))
			}
		}
		// A search costs 5 of 10 per hour: two pass, the third is denied.
		if _, err := c.Burst(3, "POST", "/search", ""); err != nil {
			return err
		}
		// The API: 3 per minute for a free key, 10 for a pro one.
		for _, k := range []struct {
			key  string
			n    int
			item string
		}{{"free_k1", 3, `"free-per-minute";r=0;`}, {"pro_k1", 10, `"pro-per-minute";r=0;`}} {
			r, err := c.Burst(k.n+1, "GET", "/api/items", "", "X-API-Key", k.key)
			if err != nil {
				return err
			}
			if err := r.WantHeader("RateLimit", k.item); err != nil {
				return err
			}
		}

		// Raise the search limit to 15 per hour: the 10 used stay used,
		// so one more search passes.
		if err := edit("10/h name search", "15/h name search"); err != nil {
			return err
		}
		if err := set.Reload(); err != nil {
			return err
		}
		if r, err = c.Expect(http.StatusOK, "POST", "/search", ""); err != nil {
			return err
		}
		if err := r.WantHeader("RateLimit", `"search";r=0;`); err != nil {
			return err
		}
		if _, err := c.Expect(http.StatusTooManyRequests, "POST", "/search", ""); err != nil {
			return err
		}

		// A mistake: the reload fails, saying where, and the running
		// rules stay.
		if err := edit("10/h name search", "0/h name search"); err != nil {
			return err
		}
		err = set.Reload()
		if want := path + ":22: limiters.search.limits: quota 0 must be at least 1"; err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("Reload of a bad file = %v, want an error saying %q", err, want)
		}
		if r, err = c.Expect(http.StatusTooManyRequests, "POST", "/search", ""); err != nil {
			return err
		}
		return r.WantHeader("RateLimit-Policy", `"search";q=15;`)
	})
}
