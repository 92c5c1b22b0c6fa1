package main

import (
	"errors"

	"github.com/tollgate/tollgate/examples/internal/selftest"
)

// selfTest serves the app on a free loopback port and checks its limits.
func selfTest() error {
	app, closeStores, err := newApp()
	if err != nil {
		return err
	}
	defer closeStores()
	ln, err := selftest.Listen()
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	err = selftest.Quickstart(selftest.NewClient("http://" + ln.Addr().String()))
	return errors.Join(err, app.Shutdown(), <-served)
}
