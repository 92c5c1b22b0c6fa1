package main

import (
	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/examples/internal/selftest"
)

// selfTest serves the app on a free loopback port and checks its limits.
func selfTest() error {
	gin.SetMode(gin.ReleaseMode) // no route listing
	r, closeStores, err := newApp()
	if err != nil {
		return err
	}
	defer closeStores()
	return selftest.ServeHTTP(r, selftest.Quickstart)
}
