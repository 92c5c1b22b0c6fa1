package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/examples/internal/selftest"
)

// selfTest checks the app on the Redis at redisAddr, under a fresh key
// prefix, then on a Redis that is down.
func selfTest(redisAddr string) error {
	if err := selfTestUp(redisAddr); err != nil {
		return err
	}
	return selfTestDown()
}

// selfTestUp serves the app on the Redis at redisAddr and checks its
// limits as the quickstarts' are checked; its decisions must reach Redis, and no store failure but a
// timeout may be logged (see selftest.RedisUp).
func selfTestUp(redisAddr string) error {
	gin.SetMode(gin.ReleaseMode) // no route listing
	rdb := newClient(redisAddr)
	defer rdb.Close()
	var seed [6]byte
	_, _ = rand.Read(seed[:])
	prefix := "tollgate-example:" + hex.EncodeToString(seed[:]) + ":"
	var logs selftest.Log
	r, closeStores, err := newApp(rdb, prefix, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		return err
	}
	defer closeStores()
	if err := selftest.ServeHTTP(r, selftest.Quickstart); err != nil {
		return fmt.Errorf("on the Redis at %s: %w (store log: %q)", redisAddr, err, logs.String())
	}
	if err := selftest.RedisUp(rdb, prefix, &logs); err != nil {
		return fmt.Errorf("on the Redis at %s: %w", redisAddr, err)
	}
	return nil
}

// selfTestDown serves the app on a Redis that refuses connections and
// checks it with selftest.RedisDown; the failures must be logged.
func selfTestDown() error {
	gin.SetMode(gin.ReleaseMode)
	rdb := newClient("127.0.0.1:1") // nothing listens on port 1
	defer rdb.Close()
	var logs selftest.Log
	r, closeStores, err := newApp(rdb, "tollgate-example:", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		return err
	}
	defer closeStores()
	if err := selftest.ServeHTTP(r, selftest.RedisDown); err != nil {
		return fmt.Errorf("with Redis down: %w", err)
	}
	// The refusal is logged as such, once per limiter and cause (the
	// burst's count follows a second later, after this test), whatever
	// the number of failed requests.
	got := logs.String()
	if n := strings.Count(got, "tollgate: store failed"); n != 2 || !strings.Contains(got, "connect: connection refused") {
		return fmt.Errorf("with Redis down: logged %q; want a line per limiter, with the refusal", got)
	}
	return nil
}
