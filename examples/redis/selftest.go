package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

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
// limits as the quickstarts' are checked; no store failure may be logged.
func selfTestUp(redisAddr string) error {
	rdb := newClient(redisAddr)
	defer rdb.Close()
	var seed [6]byte
	_, _ = rand.Read(seed[:])
	var logs syncBuffer
	h, closeStores, err := newApp(rdb, "tollgate-example:"+hex.EncodeToString(seed[:])+":", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		return err
	}
	defer closeStores()
	if err := selftest.ServeHTTP(h, selftest.Quickstart); err != nil {
		return fmt.Errorf("on the Redis at %s: %w (store log: %q)", redisAddr, err, logs.String())
	}
	if logs.Len() != 0 {
		return fmt.Errorf("on the Redis at %s: store failures: %s", redisAddr, logs.String())
	}
	return nil
}

// selfTestDown serves the app on a Redis that refuses connections: the
// app-wide limit still holds, on the fallback, at a quarter of each limit
// (FleetSize(4)); search answers 503; the failures are logged.
func selfTestDown() error {
	rdb := newClient("127.0.0.1:1") // nothing listens on port 1
	defer rdb.Close()
	var logs syncBuffer
	h, closeStores, err := newApp(rdb, "tollgate-example:", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		return err
	}
	defer closeStores()
	err = selftest.ServeHTTP(h, func(c *selftest.Client) error {
		r, err := c.Expect(http.StatusOK, "GET", "/hello", "")
		if err != nil {
			return err
		}
		if err := r.WantHeader("RateLimit", `"10-per-1s";r=1;`); err != nil {
			return err
		}
		if r, err = c.Expect(http.StatusServiceUnavailable, "POST", "/search", ""); err != nil {
			return err
		}
		if strings.Contains(r.Body, "127.0.0.1:1") || strings.Contains(r.Body, "refused") {
			return fmt.Errorf("POST /search: the 503 body leaks the store's error: %q", r.Body)
		}
		_, err = c.Burst(20, "GET", "/hello", "")
		return err
	})
	if err != nil {
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

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}
