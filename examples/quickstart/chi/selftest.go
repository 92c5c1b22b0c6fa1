package main

import "github.com/tollgate/tollgate/examples/internal/selftest"

// selfTest serves the app on a free loopback port and checks its limits.
func selfTest() error {
	h, closeStores, err := newApp()
	if err != nil {
		return err
	}
	defer closeStores()
	return selftest.ServeHTTP(h, selftest.Quickstart)
}
