package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

func TestNewRejectsProgrammerErrors(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, fixed(1, time.Minute, "m"))
	if _, err := guard.New(nil); err == nil {
		t.Error("New(nil) = nil error, want one")
	}
	tests := []struct {
		name   string
		opt    guard.Option
		option string // the option the error must name
	}{
		{"a nil limiter in a rule", guard.WithRule(nil, keyfuncs.IP()), "WithRule"},
		{"a nil key function in a rule", guard.WithRule(lim, nil), "WithRule"},
		{"a rule keyed by Optional(nil)", guard.WithRule(lim, guard.Optional(nil)), "WithRule"},
		{"a nil key function", guard.WithKey(nil), "WithKey"},
		{"a negative cost", guard.WithCost(-1), "WithCost"},
		{"a nil cost function", guard.WithCostFunc(nil), "WithCostFunc"},
		{"a nil skip function", guard.WithSkip(nil), "WithSkip"},
		{"a nil denied handler", guard.WithDeniedHandler(nil), "WithDeniedHandler"},
		{"a nil error handler", guard.WithErrorHandler(nil), "WithErrorHandler"},
		{"an unknown header style", guard.WithHeaders(99), "WithHeaders"},
		{"a negative max delay", guard.WithMaxDelay(-time.Second), "WithMaxDelay"},
		{"a nil refund matcher", guard.WithRefundOn(nil), "WithRefundOn"},
		{"a nil response cost", guard.WithResponseCost(nil), "WithResponseCost"},
		{"a nil denial hook", guard.WithOnDenied(nil), "WithOnDenied"},
		{"a nil error hook", guard.WithOnError(nil), "WithOnError"},
		{"an adapter's invalid option", guard.Invalid("WithSkipper", "nil function"), "WithSkipper"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := guard.New(lim, tt.opt)
			if !errors.Is(err, guard.ErrInvalidOption) || !strings.Contains(err.Error(), ": "+tt.option+": ") {
				t.Errorf("New(lim, %s) = %v, want an error wrapping ErrInvalidOption that names %s", tt.name, err, tt.option)
			}
			// A valid option after the invalid one does not hide it.
			if _, err := guard.New(lim, tt.opt, guard.WithCost(1)); !errors.Is(err, guard.ErrInvalidOption) {
				t.Errorf("New(lim, %s, WithCost(1)) = %v, want ErrInvalidOption", tt.name, err)
			}
		})
	}
	if _, err := guard.New(lim, nil); err != nil {
		t.Errorf("New with a nil option: %v", err)
	}
}

func TestErrorStatus(t *testing.T) {
	wrap := func(kind, err error) error { return errors.Join(kind, err) }
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"a missing key is the client's", wrap(guard.ErrKey, keyfuncs.ErrNoKey), 400},
		{"a key too long is the client's", wrap(guard.ErrKey, keyfuncs.ErrKeyTooLong), 400},
		{"an unparsable peer address is the server's", wrap(guard.ErrKey, keyfuncs.ErrBadAddress), 500},
		{"a cost function error is the client's", wrap(guard.ErrCost, errors.New("bad")), 400},
		{"a negative cost is a bug", wrap(guard.ErrCost, core.ErrInvalidCost), 500},
		{"an invalid limit is a bug", wrap(guard.ErrLimiter, core.ErrInvalidLimit), 500},
		{"an invalid op is a bug", wrap(guard.ErrLimiter, core.ErrInvalidOp), 500},
		{"a failing store is unavailable", wrap(guard.ErrLimiter, guardtest.ErrStore), 503},
		{"a closed store is unavailable", wrap(guard.ErrLimiter, core.ErrClosed), 503},
		{"a store timeout is unavailable", wrap(guard.ErrLimiter, context.DeadlineExceeded), 503},
		{"an unavailable store is a 503 even if it also wraps invalid input", wrap(guard.ErrLimiter, errors.Join(core.ErrUnavailable, core.ErrInvalidOp)), 503},
		{"a cancelled wait is unavailable", wrap(guard.ErrWait, context.Canceled), 503},
		{"anything else is unavailable", errors.New("?"), 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := guard.ErrorStatus(tt.err); got != tt.want {
				t.Errorf("ErrorStatus(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorsReachTheHookNotTheClient(t *testing.T) {
	lim := limiterOn(t, guardtest.FailingStore{}, guardtest.NewClock(guardtest.Epoch), fixed(1, time.Minute, "m"))
	var got error
	g := mustNew(t, lim, guard.WithOnError(func(_ keyfuncs.Request, err error) { got = err }))
	rec, ran := served(t, g, request("192.0.2.1:1"))
	if ran || rec.status != 503 {
		t.Fatalf("failing store: status %d, next ran %v; want 503 and not run", rec.status, ran)
	}
	if !errors.Is(got, guard.ErrLimiter) || !errors.Is(got, guardtest.ErrStore) {
		t.Errorf("OnError got %v, want it to match ErrLimiter and the store's error", got)
	}
	if strings.Contains(rec.body, "secret") || !json.Valid([]byte(rec.body)) {
		t.Errorf("body %q: want generic valid JSON", rec.body)
	}
	if ct := rec.header.Get("Content-Type"); ct != guard.ContentTypeProblem {
		t.Errorf("Content-Type = %q, want %q", ct, guard.ContentTypeProblem)
	}
}

func TestHangingStoreEndsWithTheRequestContext(t *testing.T) {
	lim := limiterOn(t, guardtest.HangingStore{}, guardtest.NewClock(guardtest.Epoch), fixed(1, time.Minute, "m"))
	g := mustNew(t, lim)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	rec, ran := served(t, g, request("192.0.2.1:1").WithContext(ctx))
	if ran || rec.status != 503 {
		t.Errorf("hanging store: status %d, next ran %v; want 503 and not run", rec.status, ran)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("hanging store held the request %v", d)
	}
}

// A request whose key cannot be read is answered with a status that says
// whose fault it is, and a detail that says what is missing without
// echoing what the client sent or an error's text.
func TestKeyErrors(t *testing.T) {
	e := newEnv(t)
	const secret = "sk-live-0123456789"
	tests := []struct {
		name   string
		key    keyfuncs.Func
		header string // X-Key
		remote string
		want   int
		detail string
	}{
		{"an empty key from a custom function is a 400 for a missing key", func(keyfuncs.Request) (string, error) { return "", nil }, "", "192.0.2.1:1", 400, "missing rate-limit key"},
		{"a missing header is a 400 naming the header as configured", keyfuncs.Header("x-key"), "", "192.0.2.1:1", 400, "missing header x-key"},
		{"a missing query parameter is a 400 naming it", keyfuncs.Query("api_key"), "", "192.0.2.1:1", 400, "missing query parameter api_key"},
		{"a key function's error never reaches the client", func(keyfuncs.Request) (string, error) {
			return "", fmt.Errorf("%w: token %s revoked", keyfuncs.ErrNoKey, secret)
		}, "", "192.0.2.1:1", 400, "missing rate-limit key"},
		{"an unparsable peer address is a 500 without detail", keyfuncs.IP(), "", "not-an-address", 500, ""},
		{"an empty peer address is a 500 without detail: the server, not the client, left it out", keyfuncs.IP(), "", "", 500, ""},
		{"a key of MaxKeyLen bytes passes", func(keyfuncs.Request) (string, error) { return strings.Repeat("x", keyfuncs.MaxKeyLen), nil }, "", "192.0.2.1:1", 200, ""},
		{"a longer key is a 400, as from keyfuncs.Header", func(keyfuncs.Request) (string, error) { return strings.Repeat("x", 1<<20), nil }, "", "192.0.2.1:1", 400, "rate-limit key longer than 1024 bytes"},
		{"a header too long is a 400 naming the header, not its value", keyfuncs.Header("X-Key"), secret + strings.Repeat("x", keyfuncs.MaxKeyLen), "192.0.2.1:1", 400, "header X-Key is longer than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustNew(t, e.limiter(t, fixed(5, time.Minute, "m")), guard.WithKey(tt.key))
			req := request(tt.remote)
			if tt.header != "" {
				req.Header.Set("X-Key", tt.header)
			}
			rec, _ := served(t, g, req)
			if rec.status != tt.want {
				t.Errorf("status = %d, want %d", rec.status, tt.want)
			}
			if tt.want == 200 {
				return
			}
			var p struct {
				Detail *string `json:"detail"`
			}
			if err := json.Unmarshal([]byte(rec.body), &p); err != nil {
				t.Fatalf("body %q: %v", rec.body, err)
			}
			switch {
			case tt.detail == "" && p.Detail != nil:
				t.Errorf("detail = %q, want none", *p.Detail)
			case tt.detail != "" && (p.Detail == nil || *p.Detail != tt.detail):
				t.Errorf("body %s, want detail %q", rec.body, tt.detail)
			}
			if strings.Contains(rec.body, secret) || strings.Contains(rec.body, "keyfuncs") {
				t.Errorf("body %s leaks the request's value or an error's text", rec.body)
			}
		})
	}
}

func TestSeveralRulesRefundEarlierRulesOnDenial(t *testing.T) {
	e := newEnv(t)
	perIP := e.limiter(t, fixed(10, time.Minute, "per-ip"))
	perUser := e.limiter(t, fixed(1, time.Minute, "per-user"))
	perTenant := e.limiter(t, fixed(100, time.Minute, "per-tenant"))
	user := keyfuncs.Join(":", keyfuncs.Static("user"), keyfuncs.Header("X-User"))
	tenant := keyfuncs.Join(":", keyfuncs.Static("tenant"), keyfuncs.Static("acme"))
	var denials []*guard.Denial
	g := mustNew(t, perIP, guard.WithCost(2),
		guard.WithRule(perUser, guard.Optional(user)),
		guard.WithRule(perTenant, tenant),
		guard.WithOnDenied(func(_ keyfuncs.Request, d *guard.Denial) { c := *d; denials = append(denials, &c) }))

	req := request("192.0.2.1:1")
	req.Header.Set("X-User", "alice")
	if rec, _ := served(t, g, req); rec.status != 429 {
		// cost 2 > per-user capacity 1: denied by rule 1, never passes
		t.Fatalf("status = %d, want 429", rec.status)
	}
	if got := remaining(t, perIP, "192.0.2.1"); got != 10 {
		t.Errorf("per-ip remaining after a per-user denial = %d, want 10 (refunded)", got)
	}
	if got := remaining(t, perTenant, "tenant:acme"); got != 100 {
		t.Errorf("per-tenant remaining = %d, want 100 (never consulted)", got)
	}
	if len(denials) != 1 || denials[0].Rule != 1 || denials[0].Key != "user:alice" || denials[0].RetryAfter != 0 {
		t.Errorf("denials = %+v, want one by rule 1 for user:alice without Retry-After", denials)
	}

	// An anonymous request skips the per-user rule.
	if rec, _ := served(t, g, request("192.0.2.1:1")); rec.status != 200 {
		t.Fatalf("anonymous: status = %d, want 200", rec.status)
	}
	if got := remaining(t, perIP, "192.0.2.1"); got != 8 {
		t.Errorf("per-ip remaining = %d, want 8", got)
	}
	if got := remaining(t, perTenant, "tenant:acme"); got != 98 {
		t.Errorf("per-tenant remaining = %d, want 98", got)
	}
}

func TestStoreErrorInALaterRuleRefundsEarlierRules(t *testing.T) {
	e := newEnv(t)
	perIP := e.limiter(t, fixed(10, time.Minute, "per-ip"))
	broken := limiterOn(t, guardtest.FailingStore{}, e.clock, fixed(1, time.Minute, "broken"))
	g := mustNew(t, perIP, guard.WithRule(broken, keyfuncs.Static("x")))
	if rec, _ := served(t, g, request("192.0.2.1:1")); rec.status != 503 {
		t.Fatalf("status = %d, want 503", rec.status)
	}
	if got := remaining(t, perIP, "192.0.2.1"); got != 10 {
		t.Errorf("per-ip remaining = %d, want 10 (refunded)", got)
	}
}

func TestDryRun(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, fixed(1, time.Minute, "m"))
	var denied []bool
	g := mustNew(t, lim, guard.WithDryRun(true),
		guard.WithOnDenied(func(_ keyfuncs.Request, d *guard.Denial) { denied = append(denied, d.DryRun) }))
	for i := range 3 {
		rec, ran := served(t, g, request("192.0.2.1:1"))
		if !ran || rec.writes != 0 {
			t.Fatalf("request %d: next ran %v, writes %d; dry run must pass", i, ran, rec.writes)
		}
		if rec.header.Get("Retry-After") != "" || rec.header.Get(guard.HeaderRateLimit) == "" {
			t.Errorf("request %d: headers %v, want RateLimit and no Retry-After", i, rec.header)
		}
	}
	if len(denied) != 2 || !denied[0] || !denied[1] {
		t.Errorf("OnDenied DryRun flags = %v, want [true true]", denied)
	}
	if got := remaining(t, lim, "192.0.2.1"); got != 0 {
		t.Errorf("remaining = %d, want 0: dry run counts as the real mode does", got)
	}
}

func TestLeakyBucket(t *testing.T) {
	leaky := core.Per(10, time.Second).WithAlgorithm(core.LeakyBucket).Named("leaky") // one per 100ms

	t.Run("a queued request waits its delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			g := mustNew(t, e.limiter(t, leaky), guard.WithMaxDelay(time.Second))
			served(t, g, request("192.0.2.1:1"))
			start := time.Now()
			rec, ran := served(t, g, request("192.0.2.1:1"))
			if !ran || rec.status != 200 {
				t.Fatalf("status %d, ran %v; want 200 after a wait", rec.status, ran)
			}
			if d := time.Since(start); d != 100*time.Millisecond {
				t.Errorf("waited %v, want 100ms", d)
			}
		})
	})

	t.Run("a wait ends with the request's context; every rule refunds it, the queue its last turn", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			lim := e.limiter(t, leaky)
			perIP := e.limiter(t, fixed(10, time.Minute, "per-ip"))
			var errs []error
			g := mustNew(t, lim, guard.WithMaxDelay(time.Second), guard.WithRule(perIP, keyfuncs.IP()),
				guard.WithOnError(func(_ keyfuncs.Request, err error) { errs = append(errs, err) }))
			for range 5 { // queue: the next request would wait 500ms
				lim.Allow(context.Background(), "192.0.2.1")
			}
			before := remaining(t, lim, "192.0.2.1")
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			rec, ran := served(t, g, request("192.0.2.1:1").WithContext(ctx))
			if ran || rec.status != 503 {
				t.Errorf("status %d, ran %v; want 503, not run", rec.status, ran)
			}
			if d := time.Since(start); d != 50*time.Millisecond {
				t.Errorf("waited %v, want 50ms (the context's deadline)", d)
			}
			if len(errs) != 1 || !errors.Is(errs[0], guard.ErrWait) || !errors.Is(errs[0], context.DeadlineExceeded) {
				t.Errorf("errors = %v, want one matching ErrWait and DeadlineExceeded", errs)
			}
			if got := remaining(t, lim, "192.0.2.1"); got != before {
				t.Errorf("leaky remaining = %d, want %d (the cancelled request's turn, the last, given back)", got, before)
			}
			if got := remaining(t, perIP, "192.0.2.1"); got != 10 {
				t.Errorf("per-ip remaining = %d, want 10 (refunded)", got)
			}
		})
	})

	t.Run("a cancelled wait keeps the spacing of the requests that leave the queue", func(t *testing.T) {
		// Real time and timers: the Limiter's clock is the system's, so
		// that each admitted request's turn is op.Now + Delay, exactly. An
		// interval of 200ms leaves the test that long to cancel request 2
		// before its turn.
		const interval = 200 * time.Millisecond
		ms := memstore.New(memstore.WithSweepInterval(0))
		defer ms.Close()
		st := &turnStore{Store: ms}
		lim, err := core.New(st, core.Per(5, time.Second).WithAlgorithm(core.LeakyBucket).Named("leaky"), core.WithClock(core.SystemClock()))
		if err != nil {
			t.Fatal(err)
		}
		g := mustNew(t, lim, guard.WithMaxDelay(time.Second))
		type outcome struct {
			status int
			ran    bool
		}
		// send serves one request in a goroutine once the previous ones
		// took their turns, so that request i has turn i.
		send := func(ctx context.Context) <-chan outcome {
			done := make(chan outcome, 1)
			n := st.takes()
			go func() {
				rec := newRecorder()
				var o outcome
				_ = g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1").WithContext(ctx)), rec, func(context.Context) guard.Result {
					o.ran, rec.status = true, 200
					return guard.Result{Status: 200}
				})
				o.status = rec.status
				done <- o
			}()
			st.waitTakes(t, n+1)
			return done
		}
		cancelled, cancel := context.WithCancel(context.Background())
		var dones []<-chan outcome
		for i := range 4 { // turns at +0, +200, +400 and +600ms
			ctx := context.Background()
			if i == 2 {
				ctx = cancelled
			}
			dones = append(dones, send(ctx))
		}
		cancel() // request 2 gives up its turn
		if o := <-dones[2]; o.ran || o.status != 503 {
			t.Errorf("cancelled request: %+v, want 503, not run", o)
		}
		dones = append(dones, send(context.Background())) // must not get request 3's turn
		for i, done := range dones {
			if i == 2 {
				continue
			}
			if o := <-done; !o.ran || o.status != 200 {
				t.Errorf("request %d: %+v, want 200 after its wait", i, o)
			}
		}
		turns := st.turns()
		admitted := []time.Time{turns[0], turns[1], turns[3], turns[4]}
		slices.SortFunc(admitted, time.Time.Compare)
		for i := 1; i < len(admitted); i++ {
			if gap := admitted[i].Sub(admitted[i-1]); gap < interval {
				t.Errorf("admitted requests %d and %d leave %v apart, want at least %v (turns %v)", i-1, i, gap, interval, turns)
			}
		}
	})

	t.Run("a request over the maximum, refunded once others queued behind it, hands out no taken turn", func(t *testing.T) {
		// Two middlewares share the LeakyBucket: hasty's maximum is below
		// the third turn, patient's is not. The store holds hasty's refund
		// until a patient request has queued behind it; the next patient
		// request must then get the turn after that one, not the same
		// turn. The Limiter's clock stands still, so that the turns are
		// exactly 0, 1, 2… intervals away however slowly the requests
		// come; the waits are real.
		const interval = 100 * time.Millisecond
		ms := memstore.New(memstore.WithSweepInterval(0))
		defer ms.Close()
		st := &refundGate{turnStore: turnStore{Store: ms}, refunding: make(chan struct{}), proceed: make(chan struct{})}
		lim, err := core.New(st, core.Per(10, time.Second).WithAlgorithm(core.LeakyBucket).Named("leaky"), core.WithClock(guardtest.NewClock(guardtest.Epoch)))
		if err != nil {
			t.Fatal(err)
		}
		patient := mustNew(t, lim, guard.WithMaxDelay(5*time.Second))
		hasty := mustNew(t, lim, guard.WithMaxDelay(interval+interval/2))
		serve := func(g *guard.Guard) <-chan int {
			done := make(chan int, 1)
			n := st.takes()
			go func() {
				rec := newRecorder()
				_ = g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), rec, func(context.Context) guard.Result {
					rec.status = 200
					return guard.Result{Status: 200}
				})
				done <- rec.status
			}()
			st.waitTakes(t, n+1)
			return done
		}
		dones := []<-chan int{serve(patient), serve(patient)} // turns +0 and +100ms
		over := serve(hasty)                                  // +200ms, over its maximum: refunded, held
		select {
		case <-st.refunding:
		case status := <-over:
			t.Fatalf("the request over its maximum ended, status %d, without a refund", status)
		case <-time.After(10 * time.Second):
			t.Fatal("no refund after 10s")
		}
		dones = append(dones, serve(patient)) // +300ms, behind it
		close(st.proceed)
		if status := <-over; status != 429 {
			t.Errorf("the request over its maximum: status %d, want 429", status)
		}
		dones = append(dones, serve(patient)) // +400ms: not +300ms, which is taken
		for i, done := range dones {
			if status := <-done; status != 200 {
				t.Errorf("patient request %d: status %d, want 200 after its wait", i, status)
			}
		}
		turns := st.turns()
		admitted := []time.Time{turns[0], turns[1], turns[3], turns[4]} // turns[2] was refunded
		for i := 1; i < len(admitted); i++ {
			if gap := admitted[i].Sub(admitted[i-1]); gap < interval {
				t.Errorf("admitted requests %d and %d leave %v apart, want at least %v (turns %v)", i-1, i, gap, interval, turns)
			}
		}
	})

	t.Run("a delay over the maximum is refunded and denied with the excess", func(t *testing.T) {
		e := newEnv(t)
		lim := e.limiter(t, leaky)
		var dn *guard.Denial
		g := mustNew(t, lim, guard.WithMaxDelay(150*time.Millisecond),
			guard.WithOnDenied(func(_ keyfuncs.Request, d *guard.Denial) { c := *d; dn = &c }))
		for range 3 {
			lim.Allow(context.Background(), "192.0.2.1")
		}
		before := remaining(t, lim, "192.0.2.1")
		rec, ran := served(t, g, request("192.0.2.1:1")) // delay 300ms
		if ran || rec.status != 429 {
			t.Fatalf("status %d, ran %v; want 429", rec.status, ran)
		}
		if got := rec.header.Get("Retry-After"); got != "1" {
			t.Errorf("Retry-After = %q, want 1 (150ms excess, rounded up)", got)
		}
		if dn == nil || !dn.Queued || dn.RetryAfter != time.Second || len(dn.Policies) != 1 || dn.Policies[0] != "leaky" {
			t.Errorf("denial = %+v, want queued, 1s, [leaky]", dn)
		}
		if got := remaining(t, lim, "192.0.2.1"); got != before {
			t.Errorf("remaining = %d, want %d (refunded)", got, before)
		}
	})

	t.Run("dry run does not wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			g := mustNew(t, e.limiter(t, leaky), guard.WithDryRun(true))
			served(t, g, request("192.0.2.1:1"))
			start := time.Now()
			served(t, g, request("192.0.2.1:1"))
			if d := time.Since(start); d != 0 {
				t.Errorf("dry run waited %v", d)
			}
		})
	})
}

func TestSettle(t *testing.T) {
	tests := []struct {
		name   string
		opts   []guard.Option
		status int
		report int64 // <0: none
		want   int64 // remaining of 10 after one request
	}{
		{"nothing to settle keeps the admitted cost", nil, 200, -1, 9},
		{"a 5xx is refunded", []guard.Option{guard.WithRefundOn(guard.ServerErrors)}, 502, -1, 10},
		{"a 4xx is not", []guard.Option{guard.WithRefundOn(guard.ServerErrors)}, 404, -1, 9},
		{"a reported cost is charged", []guard.Option{guard.WithReportedCost()}, 200, 4, 6},
		{"a reported zero is refunded", []guard.Option{guard.WithReportedCost()}, 200, 0, 10},
		{"a reported negative cost counts as zero", []guard.Option{guard.WithReportedCost()}, 200, -5, 10},
		{"refund on status wins over a report", []guard.Option{guard.WithReportedCost(), guard.WithRefundOn(guard.ServerErrors)}, 500, 7, 10},
		{"a report wins over the response cost", []guard.Option{guard.WithReportedCost(), guard.WithResponseCost(func(guard.Result) int64 { return 9 })}, 200, 3, 7},
		{"the response cost applies without a report", []guard.Option{guard.WithReportedCost(), guard.WithResponseCost(func(r guard.Result) int64 { return r.Bytes })}, 200, -1, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			lim := e.limiter(t, fixed(10, time.Minute, "m"))
			g := mustNew(t, lim, tt.opts...)
			err := g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), newRecorder(), func(ctx context.Context) guard.Result {
				if tt.report == -5 {
					guard.ReportCost(ctx, -5)
				} else if tt.report >= 0 {
					guard.ReportCost(ctx, tt.report)
				}
				return guard.Result{Status: tt.status, Bytes: 2}
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := remaining(t, lim, "192.0.2.1"); got != tt.want {
				t.Errorf("remaining = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestReportedCosts(t *testing.T) {
	tests := []struct {
		name   string
		report func(ctx context.Context)
		want   int64 // remaining of 10 after the request
	}{
		{"AddCost(MaxInt64) twice saturates instead of wrapping to a free request", func(ctx context.Context) {
			guard.AddCost(ctx, math.MaxInt64)
			guard.AddCost(ctx, math.MaxInt64)
		}, 0},
		{"an AddCost that would overflow saturates", func(ctx context.Context) {
			guard.AddCost(ctx, 3)
			guard.AddCost(ctx, math.MaxInt64-1)
		}, 0},
		{"a negative AddCost counts as 0", func(ctx context.Context) {
			guard.AddCost(ctx, 5)
			guard.AddCost(ctx, -3)
		}, 5},
		{"a negative AddCost alone reports a cost of 0", func(ctx context.Context) { guard.AddCost(ctx, -3) }, 10},
		{"AddCost after a negative ReportCost starts from 0", func(ctx context.Context) {
			guard.ReportCost(ctx, -5)
			guard.AddCost(ctx, 3)
		}, 7},
		{"ReportCost replaces what AddCost added", func(ctx context.Context) {
			guard.AddCost(ctx, 4)
			guard.ReportCost(ctx, 2)
		}, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			lim := e.limiter(t, fixed(10, time.Minute, "m"))
			g := mustNew(t, lim, guard.WithReportedCost())
			err := g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), newRecorder(), func(ctx context.Context) guard.Result {
				tt.report(ctx)
				return guard.Result{Status: 200}
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := remaining(t, lim, "192.0.2.1"); got != tt.want {
				t.Errorf("remaining = %d, want %d", got, tt.want)
			}
			if tt.want == 0 {
				if rec, ran := served(t, g, request("192.0.2.1:1")); ran || rec.status != 429 {
					t.Errorf("next request: status %d, ran %v; want 429", rec.status, ran)
				}
			}
		})
	}
}

func TestAddCostFromManyGoroutines(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, fixed(1000, time.Minute, "m"))
	g := mustNew(t, lim, guard.WithReportedCost())
	_ = g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), newRecorder(), func(ctx context.Context) guard.Result {
		done := make(chan struct{})
		for range 10 {
			go func() {
				defer func() { done <- struct{}{} }()
				for range 10 {
					guard.AddCost(ctx, 1)
				}
			}()
		}
		for range 10 {
			<-done
		}
		return guard.Result{Status: 200}
	})
	if got := remaining(t, lim, "192.0.2.1"); got != 900 {
		t.Errorf("remaining = %d, want 900", got)
	}
	if guard.ReportCost(context.Background(), 1) || guard.AddCost(context.Background(), 1) {
		t.Error("ReportCost on a context without a slot reported true")
	}
}

func TestPanicInHandlerIsSettledAsA500(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, fixed(10, time.Minute, "m"))
	g := mustNew(t, lim, guard.WithRefundOn(guard.ServerErrors))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the handler's panic did not propagate")
			}
		}()
		_ = g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), newRecorder(), func(context.Context) guard.Result {
			panic("boom")
		})
	}()
	if got := remaining(t, lim, "192.0.2.1"); got != 10 {
		t.Errorf("remaining = %d, want 10 (refunded as a 500)", got)
	}
}

func TestPanicsLeaveNoCharge(t *testing.T) {
	const boom = "boom"
	// Rule 0 allows one request per minute per IP; a panic after it took
	// its unit must give the unit back, or the next request is denied.
	trigger := func(r keyfuncs.Request) bool { return r.Header("X-Panic") != "" }
	tests := []struct {
		name  string
		extra func(e *env) []guard.Option // the further rules and options
	}{
		{"a later rule's key function", func(e *env) []guard.Option {
			return []guard.Option{guard.WithRule(e.limiter(t, fixed(100, time.Minute, "r1")), func(r keyfuncs.Request) (string, error) {
				if trigger(r) {
					panic(boom)
				}
				return "ok", nil
			})}
		}},
		{"a later rule's Limiter (its WithLimitsFunc)", func(e *env) []guard.Option {
			lim, err := core.New(e.store, core.WithClock(e.clock), core.WithLimitsFunc(func(ctx context.Context, key string) []core.Limit {
				if key == "panic" {
					panic(boom)
				}
				return []core.Limit{fixed(100, time.Minute, "r1")}
			}))
			if err != nil {
				t.Fatal(err)
			}
			return []guard.Option{guard.WithRule(lim, func(r keyfuncs.Request) (string, error) {
				if trigger(r) {
					return "panic", nil
				}
				return "ok", nil
			})}
		}},
		{"the cost function", func(*env) []guard.Option {
			return []guard.Option{guard.WithCostFunc(func(r keyfuncs.Request) (int64, error) {
				if trigger(r) {
					panic(boom)
				}
				return 1, nil
			})}
		}},
		{"the skip function", func(*env) []guard.Option {
			return []guard.Option{guard.WithSkip(func(r keyfuncs.Request) bool {
				if trigger(r) {
					panic(boom)
				}
				return false
			})}
		}},
		{"the denied handler", func(e *env) []guard.Option {
			return []guard.Option{denyingRule(t, e), guard.WithDeniedHandler(func(guard.Writer, keyfuncs.Request, *guard.Denial) error { panic(boom) })}
		}},
		{"the OnDenied hook", func(e *env) []guard.Option {
			return []guard.Option{denyingRule(t, e), guard.WithOnDenied(func(keyfuncs.Request, *guard.Denial) { panic(boom) })}
		}},
		{"the error handler", func(e *env) []guard.Option {
			return []guard.Option{failingRule(t, e), guard.WithErrorHandler(func(guard.Writer, keyfuncs.Request, error) error { panic(boom) })}
		}},
		{"the OnError hook", func(e *env) []guard.Option {
			return []guard.Option{failingRule(t, e), guard.WithOnError(func(keyfuncs.Request, error) { panic(boom) })}
		}},
		{"the OnError hook, for a refund that fails while later refunds are due", func(e *env) []guard.Option {
			// Rule 1's refunds fail; rule 3 denies the triggered request:
			// rule 2, one per minute, must be refunded whatever the hook
			// does about rule 1, or the next request is denied.
			bad := limiterOn(t, refundFailingStore{e.store}, e.clock, fixed(100, time.Minute, "r-bad"))
			return []guard.Option{
				guard.WithRule(bad, keyfuncs.Static("ok")),
				guard.WithRule(e.limiter(t, fixed(1, time.Minute, "r-one")), keyfuncs.Static("ok")),
				denyingRule(t, e),
				guard.WithOnError(func(keyfuncs.Request, error) { panic(boom) }),
			}
		}},
	}
	for _, tt := range tests {
		t.Run("a panic in "+tt.name+" propagates and leaves no charge", func(t *testing.T) {
			e := newEnv(t)
			perIP := e.limiter(t, fixed(1, time.Minute, "per-ip"))
			g := mustNew(t, perIP, tt.extra(e)...)
			req := request("192.0.2.1:1")
			req.Header.Set("X-Panic", "1")
			for range 5 {
				mustPanic(t, boom, func() { served(t, g, req) })
			}
			if got := remaining(t, perIP, "192.0.2.1"); got != 1 {
				t.Errorf("per-ip remaining after the panics = %d, want 1", got)
			}
			if rec, ran := served(t, g, request("192.0.2.1:1")); !ran || rec.status != 200 {
				t.Errorf("the next request: status %d, ran %v; want 200", rec.status, ran)
			}
		})
	}
}

// denyingRule is a rule that denies requests with X-Panic set, and admits
// others.
func denyingRule(t *testing.T, e *env) guard.Option {
	t.Helper()
	lim := e.limiter(t, fixed(100, time.Minute, "r-deny"))
	if _, err := lim.AllowN(context.Background(), "full", 100); err != nil {
		t.Fatal(err)
	}
	return guard.WithRule(lim, func(r keyfuncs.Request) (string, error) {
		if r.Header("X-Panic") != "" {
			return "full", nil
		}
		return "ok", nil
	})
}

// failingRule is a rule whose key function fails for requests with
// X-Panic set.
func failingRule(t *testing.T, e *env) guard.Option {
	t.Helper()
	return guard.WithRule(e.limiter(t, fixed(100, time.Minute, "r-fail")), func(r keyfuncs.Request) (string, error) {
		if r.Header("X-Panic") != "" {
			return "", errors.New("no key")
		}
		return "ok", nil
	})
}

func TestGoexitInAKeyFunctionLeavesNoCharge(t *testing.T) {
	e := newEnv(t)
	perIP := e.limiter(t, fixed(1, time.Minute, "per-ip"))
	g := mustNew(t, perIP, guard.WithRule(e.limiter(t, fixed(100, time.Minute, "r1")), func(r keyfuncs.Request) (string, error) {
		if r.Header("X-Exit") != "" {
			runtime.Goexit()
		}
		return "ok", nil
	}))
	req := request("192.0.2.1:1")
	req.Header.Set("X-Exit", "1")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(keyfuncs.FromHTTP(req), newRecorder(), func(context.Context) guard.Result { return guard.Result{} })
	}()
	<-done
	if got := remaining(t, perIP, "192.0.2.1"); got != 1 {
		t.Errorf("per-ip remaining after runtime.Goexit = %d, want 1", got)
	}
}

func TestSkip(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, fixed(1, time.Minute, "m"))
	var keyCalls atomic.Int32
	g := mustNew(t, lim,
		guard.WithSkip(func(r keyfuncs.Request) bool { return r.Header("X-Internal") == "1" }),
		guard.WithKey(func(r keyfuncs.Request) (string, error) { keyCalls.Add(1); return "k", nil }))
	req := request("192.0.2.1:1")
	req.Header.Set("X-Internal", "1")
	for range 3 {
		if rec, ran := served(t, g, req); !ran || len(rec.header) != 0 {
			t.Fatalf("skipped request: ran %v, headers %v", ran, rec.header)
		}
	}
	if keyCalls.Load() != 0 {
		t.Errorf("key function called %d times for skipped requests", keyCalls.Load())
	}
}

func TestRetryAfterIsNeverEarlierThanT(t *testing.T) {
	algs := []core.Algorithm{core.FixedWindow, core.SlidingWindow, core.SlidingLog, core.BucketedWindow, core.TokenBucket, core.GCRA}
	for _, alg := range algs {
		t.Run(alg.String(), func(t *testing.T) {
			e := newEnv(t)
			lim := e.limiter(t, core.Per(3, 10*time.Second).WithAlgorithm(alg).Named("p"), core.Per(5, time.Minute).WithAlgorithm(alg).Named("q"))
			g := mustNew(t, lim)
			denials := 0
			for i := range 40 {
				e.clock.Advance(700 * time.Millisecond)
				rec, _ := served(t, g, request("192.0.2.1:1"))
				if rec.status != 429 {
					continue
				}
				denials++
				ra, err := strconv.Atoi(rec.header.Get("Retry-After"))
				rl := rec.header.Get(guard.HeaderRateLimit)
				_, tv, _ := strings.Cut(rl, ";t=")
				tt, err2 := strconv.Atoi(tv)
				if err != nil || err2 != nil || ra < tt || ra < 1 {
					t.Errorf("request %d: Retry-After %q earlier than RateLimit %q", i, rec.header.Get("Retry-After"), rl)
				}
			}
			if denials == 0 {
				t.Error("no request was denied")
			}
		})
	}
}

func TestProblemBodiesAreValidJSON(t *testing.T) {
	d := &guard.Denial{RetryAfter: 17 * time.Second, Policies: []string{`we"ird\name`, "per-hour"}}
	var p struct {
		Type     string   `json:"type"`
		Title    string   `json:"title"`
		Status   int      `json:"status"`
		Detail   string   `json:"detail"`
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal(d.Problem(), &p); err != nil {
		t.Fatalf("Problem() = %s: %v", d.Problem(), err)
	}
	if p.Type != guard.ProblemType || p.Status != 429 || p.Title != "Too Many Requests" || len(p.Violated) != 2 || p.Violated[0] != `we"ird\name` {
		t.Errorf("Problem() decodes to %+v", p)
	}
	for _, err := range []error{
		errors.Join(guard.ErrKey, keyfuncs.ErrNoKey),
		errors.Join(guard.ErrCost, core.ErrInvalidCost),
		errors.Join(guard.ErrLimiter, guardtest.ErrStore),
		errors.Join(guard.ErrKey, &keyfuncs.SourceError{Kind: "query parameter", Name: "a\"b\\é\n", Err: keyfuncs.ErrNoKey}),
	} {
		rec := newRecorder()
		_ = guard.DefaultErrorHandler(rec, nil, err)
		var p struct {
			Status int    `json:"status"`
			Title  string `json:"title"`
		}
		if e := json.Unmarshal([]byte(rec.body), &p); e != nil || p.Status != rec.status || p.Title != http.StatusText(rec.status) {
			t.Errorf("error body %q for status %d: %+v, %v", rec.body, rec.status, p, e)
		}
	}
}

// errWriter fails every write, as a client gone away does.
type errWriter struct{ *recorder }

func (errWriter) WriteResponse(int, []byte) error { return http.ErrHandlerTimeout }

func TestServeReturnsTheWriteError(t *testing.T) {
	e := newEnv(t)
	g := mustNew(t, e.limiter(t, fixed(1, time.Minute, "m")), guard.WithCost(2))
	err := g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), errWriter{newRecorder()}, func(context.Context) guard.Result { return guard.Result{} })
	if !errors.Is(err, http.ErrHandlerTimeout) {
		t.Errorf("Serve = %v, want the writer's error", err)
	}
}

// A request that a later rule denies, or whose key fails, holds no unit in
// flight on an earlier rule's concurrency limit, nor does one whose next
// runs in dry run once it returns.
func TestInFlightUnitsAreReleasedWhenARequestStops(t *testing.T) {
	e := newEnv(t)
	inFlight := e.limiter(t, core.InFlight(1, time.Minute))
	perUser := e.limiter(t, core.PerMinute(1))
	g, err := guard.New(inFlight, guard.WithRule(perUser, keyfuncs.Header("X-User")))
	if err != nil {
		t.Fatal(err)
	}
	held := func() int64 {
		t.Helper()
		d, err := inFlight.Peek(context.Background(), "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		return 1 - d.Remaining
	}
	req := func(user string) *http.Request {
		r := request("192.0.2.1:1")
		if user != "" {
			r.Header.Set("X-User", user)
		}
		return r
	}
	if rec, ran := served(t, g, req("ann")); !ran || rec.status != 200 || held() != 0 {
		t.Fatalf("first request: status %d, next ran %t, %d held after it; want 200, run, none held", rec.status, ran, held())
	}
	if rec, ran := served(t, g, req("ann")); ran || rec.status != 429 || held() != 0 {
		t.Fatalf("a request the per-user rule denies: status %d, next ran %t, %d held; want 429, not run, none held", rec.status, ran, held())
	}
	if rec, ran := served(t, g, req("")); ran || rec.status != 400 || held() != 0 {
		t.Fatalf("a request without the per-user key: status %d, next ran %t, %d held; want 400, not run, none held", rec.status, ran, held())
	}
	dry, err := guard.New(inFlight, guard.WithDryRun(true), guard.WithRule(perUser, keyfuncs.Header("X-User")))
	if err != nil {
		t.Fatal(err)
	}
	if rec, ran := served(t, dry, req("ann")); !ran || rec.status != 200 || held() != 0 {
		t.Fatalf("dry run over the per-user rule: status %d, next ran %t, %d held; want 200, run, none held", rec.status, ran, held())
	}
}
