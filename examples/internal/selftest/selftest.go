// Package selftest is what the examples' -selftest flags share: serve a
// program on a free loopback port, send it requests, check the answers.
// It is not part of any example a user would copy.
package selftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Listen listens on a free loopback port.
func Listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// ServeHTTP serves h on a free loopback port, runs check against it and
// shuts the server down.
func ServeHTTP(h http.Handler, check func(c *Client) error) error {
	ln, err := Listen()
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	err = check(NewClient("http://" + ln.Addr().String()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(ctx); serr != nil && err == nil {
		err = serr
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// A Client sends requests to a server under test.
type Client struct {
	Base string
	http *http.Client
}

// NewClient returns a Client of the server at base, e.g.
// "http://127.0.0.1:4242".
func NewClient(base string) *Client {
	return &Client{Base: base, http: &http.Client{Timeout: 10 * time.Second}}
}

// A Response is a response, its body read.
type Response struct {
	Req    string // "GET /hello", for messages
	Status int
	Header http.Header
	Body   string
}

// Do sends a request with the given body (may be "") and header name,
// value pairs, and reads the response.
func (c *Client) Do(method, path, body string, header ...string) (Response, error) {
	req, err := http.NewRequest(method, c.Base+path, strings.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	return Response{Req: method + " " + path, Status: resp.StatusCode, Header: resp.Header, Body: string(b)}, nil
}

// Expect sends a request as Do does and checks it with Check.
func (c *Client) Expect(status int, method, path, body string, header ...string) (Response, error) {
	r, err := c.Do(method, path, body, header...)
	if err != nil {
		return r, err
	}
	return r, r.Check(status)
}

// Check checks r's status and, for 200 and 429, the rate-limit headers;
// for 429 also the problem+json body and Retry-After.
func (r Response) Check(status int) error {
	if r.Status != status {
		return fmt.Errorf("%s: status %d, want %d (body %q)", r.Req, r.Status, status, r.Body)
	}
	if status != http.StatusOK && status != http.StatusTooManyRequests {
		return nil
	}
	// A cost above capacity can never pass: its problem type says so, and
	// it gets neither Retry-After nor a RateLimit item that would invite a
	// retry.
	never := status == http.StatusTooManyRequests && strings.Contains(r.Body, "request-exceeds-capacity")
	for _, h := range []string{"RateLimit-Policy", "RateLimit"} {
		if r.Header.Get(h) == "" && !(never && h == "RateLimit") {
			return fmt.Errorf("%s: %d without a %s header", r.Req, r.Status, h)
		}
	}
	if status == http.StatusTooManyRequests {
		if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
			return fmt.Errorf("%s: 429 with Content-Type %q, want application/problem+json", r.Req, ct)
		}
		if !never && !strings.Contains(r.Body, "quota-exceeded") {
			return fmt.Errorf("%s: 429 body %q is neither a quota-exceeded nor a request-exceeds-capacity problem", r.Req, r.Body)
		}
		if ra := r.Header.Get("Retry-After"); (ra == "") != never {
			return fmt.Errorf("%s: 429 with Retry-After %q and body %q", r.Req, ra, r.Body)
		}
	}
	return nil
}

// WantHeader checks that r carries header name with a value containing
// want.
func (r Response) WantHeader(name, want string) error {
	if v := r.Header.Get(name); !strings.Contains(v, want) {
		return fmt.Errorf("%s: %s: %q, want it to contain %q", r.Req, name, v, want)
	}
	return nil
}

// Burst sends the same request up to n times, until one is answered 429,
// and checks that one was, and that the ones before passed with 200. It
// returns the 429.
func (c *Client) Burst(n int, method, path, body string, header ...string) (Response, error) {
	for range n {
		r, err := c.Do(method, path, body, header...)
		if err != nil {
			return r, err
		}
		if r.Status == http.StatusTooManyRequests {
			return r, r.Check(http.StatusTooManyRequests)
		}
		if err := r.Check(http.StatusOK); err != nil {
			return r, err
		}
	}
	return Response{}, fmt.Errorf("%s: %d requests in a burst, none denied", method+" "+path, n)
}

// Quickstart checks a quickstart server: 10 per second and 100 per minute
// per client app-wide (default names), GET /hello, and POST /search of cost
// 5 under a "search" limit of 20 per minute.
func Quickstart(c *Client) error {
	r, err := c.Expect(http.StatusOK, "GET", "/hello", "")
	if err != nil {
		return err
	}
	if err := r.WantHeader("RateLimit-Policy", `"10-per-1s";q=10;w=1, "100-per-1m";q=100;w=60`); err != nil {
		return err
	}
	for _, rem := range []string{"r=15", "r=10", "r=5", "r=0"} {
		r, err := c.Expect(http.StatusOK, "POST", "/search", "")
		if err != nil {
			return err
		}
		if err := r.WantHeader("RateLimit", `"search";`+rem+";"); err != nil {
			return err
		}
	}
	r, err = c.Expect(http.StatusTooManyRequests, "POST", "/search", "")
	if err != nil {
		return err
	}
	if err := r.WantHeader("RateLimit", `"search";r=0;`); err != nil {
		return err
	}
	// 6 requests so far: a burst reaches the 10 per second.
	r, err = c.Burst(20, "GET", "/hello", "")
	if err != nil {
		return err
	}
	return r.WantHeader("RateLimit", `"10-per-1s";r=0;`)
}

// RedisDown checks a quickstart server on Redis whose Redis refuses
// connections: the app-wide limit still holds, on the in-memory fallback
// and a quarter of each limit (core.FleetSize(4): 10 per second becomes
// 2), and POST /search, whose limiter fails closed, answers 503 without
// the store's error.
func RedisDown(c *Client) error {
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
}

// A Log is a buffer for a logger that the server under test writes from
// its goroutines: safe for concurrent use.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what has been written.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
