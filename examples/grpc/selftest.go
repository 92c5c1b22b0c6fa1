package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tollgate/tollgate/examples/internal/selftest"
)

// selfTest serves the server on a free loopback port, and checks its
// limits through a client.
func selfTest() error {
	srv, closeStore, err := newServer()
	if err != nil {
		return err
	}
	defer closeStore()
	ln, err := selftest.Listen()
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c, err := dial(ln.Addr().String())
	if err != nil {
		srv.Stop()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = check(ctx, c)
	cancel()
	c.Close()
	srv.GracefulStop()
	if serr := <-served; serr != nil && err == nil {
		err = serr
	}
	return err
}

// check checks a server of newServer's limits through c.
func check(ctx context.Context, c client) error {
	a := c.greet(ctx, "world")
	if err := a.want(codes.OK, "ratelimit-policy", `"10-per-1s";q=10;w=1, "100-per-1m";q=100;w=60`); err != nil {
		return fmt.Errorf("Greet: %w", err)
	}
	if len(a.values) != 1 || a.values[0] != "hello, world" {
		return fmt.Errorf("Greet: %q, want hello, world", a.values)
	}

	// Search costs 5 of its own 20 per minute: four pass, the fifth is
	// denied, and the metadata lists both interceptors' policies.
	for _, left := range []string{"r=15", "r=10", "r=5", "r=0"} {
		a := c.search(ctx, "tollgate")
		if err := a.want(codes.OK, "ratelimit", `"search";`+left+";"); err != nil {
			return fmt.Errorf("Search: %w", err)
		}
	}
	a = c.search(ctx, "tollgate")
	if err := a.want(codes.ResourceExhausted, "ratelimit-policy", `"10-per-1s";q=10;w=1, "100-per-1m";q=100;w=60, "search";q=20;w=60`); err != nil {
		return fmt.Errorf("the 5th Search: %w", err)
	}
	if a.retryDelay() <= 0 || len(a.header.Get("retry-after")) != 1 {
		return fmt.Errorf("the 5th Search: RetryInfo %v, retry-after %q; want both", a.retryDelay(), a.header.Get("retry-after"))
	}
	if v := a.violations(); !slices.Equal(v, []string{"search: quota exceeded"}) {
		return fmt.Errorf("the 5th Search: QuotaFailure violations %q, want [search: quota exceeded]", v)
	}

	// A stream is one decision, however many messages it carries.
	a = c.count(ctx, 3)
	if err := a.want(codes.OK, "ratelimit", `"10-per-1s";`); err != nil {
		return fmt.Errorf("Count: %w", err)
	}
	if strings.Join(a.values, ",") != "1,2,3" {
		return fmt.Errorf("Count(3): %q, want 1,2,3", a.values)
	}

	// 6 RPCs so far (the denied search refunded): a burst reaches the 10
	// per second, and its denial says when to come back.
	for range 20 {
		a = c.greet(ctx, "world")
		if a.err != nil {
			break
		}
	}
	if err := a.want(codes.ResourceExhausted, "ratelimit", `"10-per-1s";r=0;`); err != nil {
		return fmt.Errorf("a burst of Greet: %w", err)
	}
	// Whole seconds, as Retry-After: 1, or 2 when the burst straddled a
	// second of the sliding window (its previous second still counts).
	d := a.retryDelay()
	if d != time.Second && d != 2*time.Second {
		return fmt.Errorf("a burst of Greet: RetryInfo delay %v, want 1s or 2s", d)
	}
	if got, want := a.header.Get("retry-after"), []string{strconv.Itoa(int(d / time.Second))}; !slices.Equal(got, want) {
		return fmt.Errorf("a burst of Greet: retry-after %q beside RetryInfo %v, want %q", got, d, want)
	}
	return nil
}

// want checks a's code, and that its header metadata key holds one value
// containing value.
func (a answer) want(code codes.Code, key, value string) error {
	if a.status.Code() != code {
		return fmt.Errorf("code %v (%v), want %v", a.status.Code(), a.err, code)
	}
	if v := a.header.Get(key); len(v) != 1 || !strings.Contains(v[0], value) {
		return fmt.Errorf("metadata %s: %q, want one value containing %q", key, v, value)
	}
	return nil
}
