package fiberlimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gofiber/fiber/v2"
	fiberrecover "github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/fiberlimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

func TestNewPanicsOnProgrammerErrors(t *testing.T) {
	lim := newLimiter(t, nil, fixed(1, "m"))
	for name, f := range map[string]func(){
		"nil limiter":          func() { fiberlimit.New(nil) },
		"negative cost":        func() { fiberlimit.New(lim, fiberlimit.WithCost(-1)) },
		"negative max delay":   func() { fiberlimit.New(lim, fiberlimit.WithMaxDelay(-time.Second)) },
		"nil limiter in rule":  func() { fiberlimit.New(lim, fiberlimit.WithRule(nil, nil)) },
		"unknown header style": func() { fiberlimit.New(lim, fiberlimit.WithHeaders(guard.HeaderStyle(200))) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("New with a %s did not panic", name)
				}
			}()
			f()
		})
	}
}

func TestNextSkipsRequests(t *testing.T) {
	app := fiber.New()
	app.Use(fiberlimit.New(newLimiter(t, nil, fixed(1, "m")),
		fiberlimit.WithNext(func(c *fiber.Ctx) bool { return c.Path() == "/health" })))
	app.Get("/*", ok)
	steps := []struct {
		path      string
		status    int
		rateLimit string
	}{
		{"/health", 200, ""},
		{"/", 200, `"m";r=0;t=60`},
		{"/health", 200, ""},
		{"/", 429, `"m";r=0;t=60`},
	}
	for i, s := range steps {
		resp := do(app, "GET", s.path)
		if got, rl := resp.StatusCode(), string(resp.Header.Peek("RateLimit")); got != s.status || rl != s.rateLimit {
			t.Errorf("request %d GET %s = %d RateLimit %q, want %d %q", i, s.path, got, rl, s.status, s.rateLimit)
		}
	}
}

func TestPerRouteAndPerGroup(t *testing.T) {
	app := fiber.New()
	app.Post("/search", fiberlimit.New(newLimiter(t, nil, fixed(10, "search")), fiberlimit.WithCost(5)), ok)
	api := app.Group("/api", fiberlimit.New(newLimiter(t, nil, fixed(2, "api"))))
	api.Get("/a", ok)
	api.Get("/b", ok)
	app.Get("/free", ok)
	steps := []struct {
		method, path string
		status       int
		rateLimit    string
	}{
		{"POST", "/search", 200, `"search";r=5;t=60`},
		{"POST", "/search", 200, `"search";r=0;t=60`},
		{"POST", "/search", 429, `"search";r=0;t=60`},
		{"GET", "/api/a", 200, `"api";r=1;t=60`},
		{"GET", "/api/b", 200, `"api";r=0;t=60`}, // the group shares one limit
		{"GET", "/api/a", 429, `"api";r=0;t=60`},
		{"GET", "/free", 200, ""},
		{"GET", "/api/nothing", 429, `"api";r=0;t=60`}, // the group's middleware runs before the 404
	}
	for i, s := range steps {
		resp := do(app, s.method, s.path)
		if got, rl := resp.StatusCode(), string(resp.Header.Peek("RateLimit")); got != s.status || rl != s.rateLimit {
			t.Errorf("request %d %s %s = %d RateLimit %q, want %d %q", i, s.method, s.path, got, rl, s.status, s.rateLimit)
		}
	}
}

func TestRouteKeyIsTheMountedRoutePattern(t *testing.T) {
	var keys []string
	mw := fiberlimit.New(newLimiter(t, nil, fixed(2, "per-route")),
		fiberlimit.WithKey(keyfuncs.Route()),
		fiberlimit.WithOnDenied(func(c *fiber.Ctx, d *guard.Denial) { keys = append(keys, d.Key) }))
	mwUse := fiberlimit.New(newLimiter(t, nil, fixed(2, "use")), fiberlimit.WithKey(keyfuncs.Route()),
		fiberlimit.WithOnDenied(func(c *fiber.Ctx, d *guard.Denial) { keys = append(keys, d.Key) }))
	app := fiber.New()
	app.Get("/users/:id", mw, ok)
	app.Group("/v1").Get("/items/:id", mw, ok)
	app.Use("/use", mwUse)
	app.Get("/use/x", ok)
	app.Get("/use/y", ok)
	steps := []struct {
		path   string
		status int
	}{
		{"/users/1", 200},
		{"/users/2", 200},
		{"/users/3", 429}, // one key per route pattern, whatever the parameters
		{"/v1/items/1", 200},
		{"/v1/items/2", 200},
		{"/v1/items/3", 429},
		{"/use/x", 200}, // app.Use: the route is the Use prefix
		{"/use/y", 200},
		{"/use/x", 429},
	}
	for i, s := range steps {
		if got := do(app, "GET", s.path).StatusCode(); got != s.status {
			t.Errorf("request %d GET %s = %d, want %d", i, s.path, got, s.status)
		}
	}
	if want := []string{"/users/:id", "/v1/items/:id", "/use"}; fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Errorf("denied keys = %q, want %q", keys, want)
	}
}

type userID int

func (u userID) String() string { return fmt.Sprintf("user-%d", int(u)) }

func TestLocalsKey(t *testing.T) {
	var denied []string
	app := fiber.New()
	app.Use(func(c *fiber.Ctx) error { // an authentication middleware
		switch u := c.Get("X-User"); {
		case u == "seven":
			c.Locals("user", userID(7))
		case u == "nil":
			c.Locals("user", (*strings.Builder)(nil))
		case u != "":
			c.Locals("user", u) // points into the request buffer: Locals copies it
		}
		return c.Next()
	})
	app.Use(fiberlimit.New(newLimiter(t, nil, fixed(1, "per-user")),
		fiberlimit.WithKey(fiberlimit.Locals("user")),
		fiberlimit.WithOnDenied(func(c *fiber.Ctx, d *guard.Denial) { denied = append(denied, d.Key) })))
	app.Get("/", ok)
	steps := []struct {
		user   string
		status int
	}{
		{"alice", 200},
		{"alice", 429},
		{"bob", 200},
		{"seven", 200},
		{"seven", 429},
		{"", 400},    // no user: no key
		{"nil", 400}, // a nil Stringer is no key either
	}
	for i, s := range steps {
		var h []string
		if s.user != "" {
			h = []string{"X-User", s.user}
		}
		if got := do(app, "GET", "/", h...).StatusCode(); got != s.status {
			t.Errorf("request %d as %q = %d, want %d", i, s.user, got, s.status)
		}
	}
	if want := []string{"alice", "user-7"}; fmt.Sprint(denied) != fmt.Sprint(want) {
		t.Errorf("denied keys = %q, want %q", denied, want)
	}
}

func TestSettleOnTheStatusFiberSends(t *testing.T) {
	type seen struct{ err error }
	tests := []struct {
		name    string
		handler fiber.Handler
		errH    fiber.ErrorHandler
		status  int
		refund  bool
	}{
		{"a returned fiber.Error is settled with its code", func(c *fiber.Ctx) error { return fiber.ErrServiceUnavailable }, nil, 503, true},
		{"a plain error is settled as the 500 fiber sends", func(c *fiber.Ctx) error { return errors.New("boom") }, nil, 500, true},
		{"the app's ErrorHandler decides the status", func(c *fiber.Ctx) error { return errors.New("upstream") },
			func(c *fiber.Ctx, err error) error { return c.Status(502).SendString("bad gateway") }, 502, true},
		{"an ErrorHandler that fails is settled as a 500", func(c *fiber.Ctx) error { return errors.New("x") },
			func(c *fiber.Ctx, err error) error { return err }, 500, true},
		{"a returned 404 is not refunded", func(c *fiber.Ctx) error { return fiber.ErrNotFound }, nil, 404, false},
		{"a status set without error counts", func(c *fiber.Ctx) error { return c.SendStatus(500) }, nil, 500, true},
		{"a success is charged", ok, nil, 200, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fiber.Config{}
			if tt.errH != nil {
				cfg.ErrorHandler = tt.errH
			}
			app := fiber.New(cfg)
			var outer seen
			app.Use(func(c *fiber.Ctx) error { outer.err = c.Next(); return outer.err })
			app.Use(fiberlimit.New(newLimiter(t, nil, fixed(1, "m")), fiberlimit.WithRefundOn(guard.ServerErrors)))
			app.Get("/", tt.handler)
			if got := do(app, "GET", "/").StatusCode(); got != tt.status {
				t.Errorf("status = %d, want %d", got, tt.status)
			}
			if outer.err != nil {
				t.Errorf("the outer middleware got %v, want nil: the error was committed", outer.err)
			}
			want := 429
			if tt.refund {
				want = tt.status
			}
			if got := do(app, "GET", "/").StatusCode(); got != want {
				t.Errorf("second request = %d, want %d (refunded: %v)", got, want, tt.refund)
			}
		})
	}
}

func TestHandlerErrorPassesThroughWhenNothingSettles(t *testing.T) {
	app := fiber.New()
	errTeapot := fiber.NewError(418, "short and stout")
	var got error
	app.Use(func(c *fiber.Ctx) error { got = c.Next(); return got })
	app.Use(fiberlimit.New(newLimiter(t, nil, fixed(5, "m"))))
	app.Get("/", func(c *fiber.Ctx) error { return errTeapot })
	if resp := do(app, "GET", "/"); resp.StatusCode() != 418 || string(resp.Header.Peek("RateLimit")) != `"m";r=4;t=60` {
		t.Errorf("GET / = %d RateLimit %q, want 418 with headers", resp.StatusCode(), resp.Header.Peek("RateLimit"))
	}
	if got != errTeapot {
		t.Errorf("the outer middleware got %v, want the handler's error", got)
	}
}

func TestResponseCostCountsTheBodyFiberSends(t *testing.T) {
	app := fiber.New()
	app.Use(fiberlimit.New(newLimiter(t, nil, fixed(100, "bytes")),
		fiberlimit.WithResponseCost(func(r guard.Result) int64 { return r.Bytes })))
	app.Get("/body", func(c *fiber.Ctx) error { return c.SendString("0123456789") })
	app.Get("/stream", func(c *fiber.Ctx) error { return c.SendStream(strings.NewReader("01234567890123456789"), 20) })
	app.Get("/err", func(c *fiber.Ctx) error { return fiber.NewError(400, "abc") })
	do(app, "GET", "/body")
	if fctx := serve(app, "GET", "/stream"); !fctx.Response.IsBodyStream() {
		t.Error("GET /stream: the middleware read the body stream instead of leaving it to be sent")
	}
	do(app, "GET", "/err")
	// 100 − 10 − 20 − 3 (fiber's body for the error) − 1 admitted now
	if got := string(do(app, "GET", "/nope").Header.Peek("RateLimit")); got != `"bytes";r=66;t=60` {
		t.Errorf("RateLimit = %q, want r=66", got)
	}
}

// The handlers after the middleware run under the request's user context,
// even one of a type == cannot compare (a struct value with a slice
// field). Without WithReportedCost the middleware leaves the user context
// alone: one a handler sets is still there once the middleware returns.
// With it, the handlers run under a context that carries the cost slot,
// and the outer one is put back.
func TestUserContextThroughTheMiddleware(t *testing.T) {
	type ctxKey struct{}
	for _, uncomparable := range []bool{false, true} {
		for _, reported := range []bool{false, true} {
			var opts []fiberlimit.Option
			if reported {
				opts = append(opts, fiberlimit.WithReportedCost())
			}
			app := fiber.New()
			app.Use(func(c *fiber.Ctx) error {
				ctx := context.WithValue(c.UserContext(), guardtest.UncomparableKey{}, "seen")
				if uncomparable {
					ctx = guardtest.UncomparableContext(c.UserContext())
				}
				c.SetUserContext(ctx)
				err := c.Next()
				after := c.UserContext()
				if kept := after.Value(ctxKey{}) == "handler"; kept == reported {
					t.Errorf("uncomparable %v, reported cost %v: after the middleware, the handler's user context is kept = %v", uncomparable, reported, kept)
				}
				if after.Value(guardtest.UncomparableKey{}) != "seen" || guard.ReportCost(after, 1) {
					t.Errorf("uncomparable %v, reported cost %v: after the middleware, the user context is neither the outer one nor one over it", uncomparable, reported)
				}
				return err
			})
			app.Use(fiberlimit.New(newLimiter(t, nil, fixed(100, "m")), opts...))
			app.Get("/", func(c *fiber.Ctx) error {
				if c.UserContext().Value(guardtest.UncomparableKey{}) != "seen" {
					t.Error("the handler's user context lost the request's")
				}
				if fiberlimit.ReportCost(c, 10) != reported {
					t.Errorf("reported cost %v: ReportCost found a slot = %v", reported, !reported)
				}
				c.SetUserContext(context.WithValue(c.UserContext(), ctxKey{}, "handler"))
				return nil
			})
			resp := do(app, "GET", "/")
			if got := string(resp.Header.Peek("RateLimit")); resp.StatusCode() != fiber.StatusOK || got != `"m";r=99;t=60` {
				t.Errorf("uncomparable %v, reported cost %v: status %d, RateLimit %q; want 200, r=99", uncomparable, reported, resp.StatusCode(), got)
			}
		}
	}
}

// With WithReportedCost, the outer user context comes back when a handler
// panics too: a recover middleware outside finds it, not the context that
// carries the settled request's cost slot.
func TestUserContextComesBackWhenAHandlerPanics(t *testing.T) {
	app := fiber.New()
	app.Use(outerContext(t))
	app.Use(fiberrecover.New())
	app.Use(fiberlimit.New(newLimiter(t, nil, fixed(100, "m")), fiberlimit.WithReportedCost()))
	app.Get("/", func(c *fiber.Ctx) error { panic("boom") })
	if resp := do(app, "GET", "/"); resp.StatusCode() != fiber.StatusInternalServerError {
		t.Errorf("status %d, want 500 from the recover middleware", resp.StatusCode())
	}
}

// A handler may leave a context of its own as the user context, cancelled
// as it returns, as fiber's timeout middleware does: the request was served
// all the same, and the adaptive limit takes its latency as a sample.
func TestAdaptiveSamplesTheRequestNotAContextAHandlerLeft(t *testing.T) {
	clock := guardtest.NewClock(guardtest.Epoch)
	ad := guardtest.FixedAdaptive(t, clock, 5)
	app := fiber.New()
	app.Use(fiberlimit.New(nil, fiberlimit.WithAdaptive(ad)))
	app.Get("/", func(c *fiber.Ctx) error {
		ctx, cancel := context.WithCancel(c.UserContext())
		defer cancel()
		c.SetUserContext(ctx)
		clock.Advance(30 * time.Millisecond)
		return nil
	})
	if resp := do(app, "GET", "/"); resp.StatusCode() != fiber.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode())
	}
	if s := ad.Stats(); s.InFlight != 0 || s.Latency != 30*time.Millisecond {
		t.Errorf("Stats() = %+v, want nothing in flight and the request's 30ms as a sample", s)
	}
}

// outerContext returns a handler that sets a user context carrying "outer"
// under outerKey, and checks that it is the user context again once the
// handlers after it return.
func outerContext(t *testing.T) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.SetUserContext(context.WithValue(c.UserContext(), outerKey{}, "outer"))
		err := c.Next()
		if c.UserContext().Value(outerKey{}) != "outer" || guard.ReportCost(c.UserContext(), 1) {
			t.Error("after the middleware, the user context is not the outer one again")
		}
		return err
	}
}

type outerKey struct{}

func TestReportCost(t *testing.T) {
	app := fiber.New()
	app.Use(outerContext(t))
	app.Use(fiberlimit.New(newLimiter(t, nil, fixed(100, "m")), fiberlimit.WithReportedCost()))
	app.Get("/fiber", func(c *fiber.Ctx) error {
		if c.UserContext().Value(outerKey{}) != "outer" {
			t.Error("the handler's user context lost the outer values")
		}
		if !fiberlimit.ReportCost(c, 40) {
			t.Error("ReportCost found no slot")
		}
		return nil
	})
	app.Get("/guard", func(c *fiber.Ctx) error {
		guard.AddCost(c.UserContext(), 5)
		fiberlimit.AddCost(c, 5)
		return nil
	})
	do(app, "GET", "/fiber")
	do(app, "GET", "/guard")
	if got := string(do(app, "GET", "/").Header.Peek("RateLimit")); got != `"m";r=49;t=60` {
		t.Errorf("RateLimit = %q, want r=49 (100 − 40 − 10 − 1)", got)
	}

	plain := fiber.New()
	plain.Use(fiberlimit.New(newLimiter(t, nil, fixed(100, "m"))))
	plain.Get("/", func(c *fiber.Ctx) error {
		if fiberlimit.ReportCost(c, 1) {
			t.Error("ReportCost found a slot without WithReportedCost")
		}
		return nil
	})
	do(plain, "GET", "/")
}

func TestNilFunctionsPanicAtConstruction(t *testing.T) {
	lim := newLimiter(t, nil, fixed(1, "m"))
	tests := []struct {
		option string
		opt    fiberlimit.Option
	}{
		{"WithKeyFunc", fiberlimit.WithKeyFunc(nil)},
		{"WithKey", fiberlimit.WithKey(nil)},
		{"WithRule", fiberlimit.WithRule(lim, nil)},
		{"WithRule", fiberlimit.WithRule(lim, fiberlimit.KeyFunc(nil))},
		{"WithCostFunc", fiberlimit.WithCostFunc(nil)},
		{"WithNext", fiberlimit.WithNext(nil)},
		{"WithDeniedHandler", fiberlimit.WithDeniedHandler(nil)},
		{"WithErrorHandler", fiberlimit.WithErrorHandler(nil)},
		{"WithRefundOn", fiberlimit.WithRefundOn(nil)},
		{"WithResponseCost", fiberlimit.WithResponseCost(nil)},
		{"WithOnDenied", fiberlimit.WithOnDenied(nil)},
		{"WithOnError", fiberlimit.WithOnError(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.option+" of nil panics in New, naming it", func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "fiberlimit: New: ") || !strings.Contains(s, ": "+tt.option+": nil ") {
					t.Errorf("New(lim, %s(nil)) recovered %v, want a fiberlimit panic naming %s", tt.option, r, tt.option)
				}
			}()
			fiberlimit.New(lim, tt.opt)
		})
	}
}

func TestTheDefaultKeyIsThePeer(t *testing.T) {
	app := fiber.New()
	app.Use(fiberlimit.New(newLimiter(t, nil, fixed(1, "m"))))
	app.Get("/", ok)
	for i, want := range []int{200, 429} {
		if got := do(app, "GET", "/").StatusCode(); got != want {
			t.Errorf("request %d = %d, want %d (one peer, one key)", i, got, want)
		}
	}
}

func TestNativeOptions(t *testing.T) {
	var denied, errored int
	app := fiber.New()
	app.Use(fiberlimit.New(newLimiter(t, nil, fixed(3, "m")),
		fiberlimit.WithKeyFunc(func(c *fiber.Ctx) (string, error) {
			if u := c.Query("user"); u != "" {
				return u, nil
			}
			return "", errors.New("no user (secret)")
		}),
		fiberlimit.WithCostFunc(func(c *fiber.Ctx) (int64, error) { return int64(len(c.Query("x"))), nil }),
		fiberlimit.WithDeniedHandler(func(c *fiber.Ctx, d *guard.Denial) error {
			if c.Query("user") == "err" {
				return fiber.NewError(fiber.StatusTeapot, "denied by error")
			}
			return c.Status(fiber.StatusTooManyRequests).SendString("denied " + d.Key)
		}),
		fiberlimit.WithErrorHandler(func(c *fiber.Ctx, err error) error {
			return fiber.NewError(guard.ErrorStatus(err))
		}),
		fiberlimit.WithOnDenied(func(c *fiber.Ctx, d *guard.Denial) { denied++ }),
		fiberlimit.WithOnError(func(c *fiber.Ctx, err error) { errored++ }),
	))
	app.Get("/", ok)
	tests := []struct {
		target string
		want   int
		body   string
	}{
		{"/?user=a&x=yy", 200, "ok"},
		{"/?user=a&x=yy", 429, "denied a"},
		{"/?user=err&x=yyyy", 418, "denied by error"},
		{"/", 400, "Bad Request"},
		{"/?user=a&x=y", 200, "ok"},
	}
	for i, tt := range tests {
		resp := do(app, "GET", tt.target)
		if resp.StatusCode() != tt.want || string(resp.Body()) != tt.body {
			t.Errorf("request %d GET %s = %d %q, want %d %q", i, tt.target, resp.StatusCode(), resp.Body(), tt.want, tt.body)
		}
		if tt.want == 429 && string(resp.Header.Peek("Retry-After")) != "60" {
			t.Errorf("request %d: the native denied handler's response lacks Retry-After", i)
		}
	}
	if denied != 2 || errored != 1 {
		t.Errorf("hooks: %d denials, %d errors; want 2 and 1", denied, errored)
	}
}

func TestErrorTextNeverLeaks(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.7:6379: secret detail")
	tests := []struct {
		name   string
		store  core.Store
		opts   []fiberlimit.Option
		status int
		body   string
	}{
		{"a failing store", guardtest.FailingStore{Err: secret}, nil, 503, guardtest.ProblemStatus(503)},
		{"a key function's error", nil, []fiberlimit.Option{fiberlimit.WithKeyFunc(func(*fiber.Ctx) (string, error) { return "", secret })},
			400, guardtest.ProblemStatus(400)},
		{"a cost function's error", nil, []fiberlimit.Option{fiberlimit.WithCostFunc(func(*fiber.Ctx) (int64, error) { return 0, secret })},
			400, guardtest.ProblemStatus(400)},
		{"an error handler that returns a fiber.Error", guardtest.FailingStore{Err: secret},
			[]fiberlimit.Option{fiberlimit.WithErrorHandler(func(c *fiber.Ctx, err error) error { return fiber.NewError(guard.ErrorStatus(err)) })},
			503, "Service Unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := fiber.New()
			app.Use(fiberlimit.New(newLimiter(t, tt.store, fixed(1, "m")), tt.opts...))
			app.Get("/", ok)
			resp := do(app, "GET", "/")
			if resp.StatusCode() != tt.status || string(resp.Body()) != tt.body {
				t.Errorf("GET / = %d %q, want %d %q", resp.StatusCode(), resp.Body(), tt.status, tt.body)
			}
			if strings.Contains(resp.String(), "secret") || strings.Contains(resp.String(), "10.0.0.7") {
				t.Errorf("the response leaks the error's text:\n%s", resp)
			}
		})
	}
}

// withUserTimeout is the timeout middleware fasthttp needs: it gives the
// user context a deadline.
func withUserTimeout(d time.Duration) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(c.UserContext(), d)
		defer cancel()
		c.SetUserContext(ctx)
		return c.Next()
	}
}

func TestHangingStoreEndsWithTheUserContext(t *testing.T) {
	app := fiber.New()
	app.Use(withUserTimeout(10 * time.Millisecond))
	app.Use(fiberlimit.New(newLimiter(t, guardtest.HangingStore{}, fixed(1, "m"))))
	app.Get("/", func(c *fiber.Ctx) error { t.Error("handler ran"); return nil })
	if resp := do(app, "GET", "/"); resp.StatusCode() != 503 || strings.Contains(string(resp.Body()), "deadline") {
		t.Errorf("hanging store: %d %s; want 503 with a generic body", resp.StatusCode(), resp.Body())
	}
}

func TestLeakyBucketWaitIsCancelledWithTheUserContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newLimiter(t, nil, core.Per(1, time.Second).WithAlgorithm(core.LeakyBucket).WithBurst(10).Named("leaky"))
		app := fiber.New()
		app.Use(func(c *fiber.Ctx) error {
			if c.Query("cancel") == "" {
				return c.Next()
			}
			ctx, cancel := context.WithCancel(c.UserContext())
			defer cancel()
			go func() {
				time.Sleep(300 * time.Millisecond)
				cancel()
			}()
			c.SetUserContext(ctx)
			return c.Next()
		})
		app.Use(fiberlimit.New(lim, fiberlimit.WithMaxDelay(time.Minute)))
		app.Get("/", ok)
		do(app, "GET", "/") // the next one waits 1s
		start := time.Now()
		if resp := do(app, "GET", "/?cancel=1"); resp.StatusCode() != 503 || time.Since(start) != 300*time.Millisecond {
			t.Errorf("cancelled wait: %d after %v; want 503 after 300ms", resp.StatusCode(), time.Since(start))
		}
		start = time.Now()
		if resp := do(app, "GET", "/"); resp.StatusCode() != 200 || time.Since(start) != time.Second {
			t.Errorf("next request: %d after %v; want 200 after 1s (the cancelled one's turn, the last in the queue, given back)", resp.StatusCode(), time.Since(start))
		}
	})
}

func TestPanicRefundsAndPropagates(t *testing.T) {
	app := fiber.New()
	app.Use(fiberlimit.New(newLimiter(t, nil, fixed(1, "m")), fiberlimit.WithRefundOn(guard.ServerErrors)))
	app.Get("/panic", func(c *fiber.Ctx) error { panic("boom") })
	app.Get("/", ok)
	func() {
		defer func() {
			if recover() != "boom" {
				t.Error("panic did not propagate")
			}
		}()
		do(app, "GET", "/panic")
	}()
	if got := do(app, "GET", "/").StatusCode(); got != 200 {
		t.Errorf("after a panicking request: %d, want 200 (refunded)", got)
	}
}

func TestTrustModel(t *testing.T) {
	trusted := keyfuncs.IP(keyfuncs.TrustProxies(netipPrefix("192.0.2.0/24")), keyfuncs.FromXForwardedFor())
	tests := []struct {
		name string
		opt  []fiberlimit.Option
		want []int
	}{
		{"by default a forwarding header changes nothing, even with fiber's ProxyHeader set", nil, []int{200, 429}},
		{"with the peer trusted, X-Forwarded-For keys the clients apart", []fiberlimit.Option{fiberlimit.WithKey(trusted)}, []int{200, 200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := fiber.New(fiber.Config{ProxyHeader: fiber.HeaderXForwardedFor}) // fiber's setting: not ours
			app.Use(fiberlimit.New(newLimiter(t, nil, fixed(1, "m")), tt.opt...))
			app.Get("/", ok)
			for i, xff := range []string{"203.0.113.1", "203.0.113.2"} {
				if got := do(app, "GET", "/", "X-Forwarded-For", xff).StatusCode(); got != tt.want[i] {
					t.Errorf("request %d from %s = %d, want %d", i, xff, got, tt.want[i])
				}
			}
		})
	}
}

func TestPanicsInConfiguredFunctionsLeaveNoCharge(t *testing.T) {
	const boom = guardtest.Boom
	when := func(c *fiber.Ctx, trigger string) bool { return c.Get(guardtest.TriggerHeader) == trigger }
	tests := []struct {
		name, trigger string
		opts          []fiberlimit.Option
	}{
		{"a later rule's key function", "panic", nil},
		{"the cost function", "panic", []fiberlimit.Option{fiberlimit.WithCostFunc(func(c *fiber.Ctx) (int64, error) {
			if when(c, "panic") {
				panic(boom)
			}
			return 1, nil
		})}},
		{"the Next function", "panic", []fiberlimit.Option{fiberlimit.WithNext(func(c *fiber.Ctx) bool {
			if when(c, "panic") {
				panic(boom)
			}
			return false
		})}},
		{"the denied handler", "deny", []fiberlimit.Option{fiberlimit.WithDeniedHandler(func(*fiber.Ctx, *guard.Denial) error { panic(boom) })}},
		{"the OnDenied hook", "deny", []fiberlimit.Option{fiberlimit.WithOnDenied(func(*fiber.Ctx, *guard.Denial) { panic(boom) })}},
		{"the error handler", "fail", []fiberlimit.Option{fiberlimit.WithErrorHandler(func(*fiber.Ctx, error) error { panic(boom) })}},
		{"the OnError hook", "fail", []fiberlimit.Option{fiberlimit.WithOnError(func(*fiber.Ctx, error) { panic(boom) })}},
	}
	for _, tt := range tests {
		t.Run("a panic in "+tt.name+" reaches fiber's recover middleware and leaves no charge", func(t *testing.T) {
			var recovered []any
			app := fiber.New()
			app.Use(fiberrecover.New(fiberrecover.Config{EnableStackTrace: true, StackTraceHandler: func(_ *fiber.Ctx, e any) {
				recovered = append(recovered, e)
			}}))
			app.Use(fiberlimit.New(newLimiter(t, nil, fixed(1, "per-ip")), append(tt.opts, guardtest.TriggerRule(t))...))
			app.Get("/", ok)
			for i := range 3 {
				if got := do(app, "GET", "/", guardtest.TriggerHeader, tt.trigger).StatusCode(); got != 500 {
					t.Errorf("request %d with %s = %d, want 500 from fiber's recover middleware", i, tt.trigger, got)
				}
			}
			if len(recovered) != 3 || recovered[0] != boom {
				t.Errorf("fiber recovered %v, want the panic %q three times", recovered, boom)
			}
			if got := do(app, "GET", "/").StatusCode(); got != 200 {
				t.Errorf("the next request = %d, want 200: the panicking ones left no charge", got)
			}
		})
	}
}
