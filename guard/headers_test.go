package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// headersFor serves one request against a store that answers d, in style.
func headersFor(t *testing.T, d core.Decision, style guard.HeaderStyle) *recorder {
	t.Helper()
	l := d.Limit
	if l == (core.Limit{}) {
		l = fixed(1, time.Minute, "m")
	}
	lim := limiterOn(t, stubStore{d}, guardtest.NewClock(guardtest.Epoch), l)
	g := mustNew(t, lim, guard.WithHeaders(style))
	rec, _ := served(t, g, request("192.0.2.1:1"))
	return rec
}

// TestHeaderValues checks the encoding of one decision. t is the effective
// window (EffectiveWindow), rounded up; before draft-11 it was sent as the
// time until full replenishment (ResetAfter), which these cases set to
// something else to show it is not sent. w is exact.
func TestHeaderValues(t *testing.T) {
	lim := core.Per(100, 90*time.Second+time.Millisecond).Named("odd")
	tests := []struct {
		name  string
		d     core.Decision
		style guard.HeaderStyle
		want  map[string]string
	}{
		{"t is the effective window rounded up, and a period of whole milliseconds is scaled to whole seconds", core.Decision{Allowed: true, Limit: lim, Remaining: 42, ResetAfter: time.Hour, EffectiveWindow: 16*time.Second + time.Microsecond}, guard.HeadersDraft11,
			map[string]string{guard.HeaderRateLimitPolicy: `"odd";q=100000;w=90001`, guard.HeaderRateLimit: `"odd";r=42;t=17`}},
		{"an effective window under a second is 1", core.Decision{Allowed: true, Limit: lim, Remaining: 1, ResetAfter: time.Hour, EffectiveWindow: time.Microsecond}, guard.HeadersDraft11,
			map[string]string{guard.HeaderRateLimit: `"odd";r=1;t=1`}},
		{"no effective window is 0", core.Decision{Allowed: true, Limit: lim, Remaining: 1, ResetAfter: time.Hour}, guard.HeadersDraft11,
			map[string]string{guard.HeaderRateLimit: `"odd";r=1;t=0`}},
		{"negative remaining is 0", core.Decision{Allowed: true, Limit: lim, Remaining: -5}, guard.HeadersDraft11,
			map[string]string{guard.HeaderRateLimit: `"odd";r=0;t=0`}},
		{"a Never effective window is clamped to an sf-integer", core.Decision{Allowed: true, Limit: lim, EffectiveWindow: core.Never}, guard.HeadersDraft11,
			map[string]string{guard.HeaderRateLimit: `"odd";r=0;t=9223372037`}},
		{"an unnamed limit gets its derived name", core.Decision{Allowed: true, Limit: core.PerHour(5), Remaining: 4, EffectiveWindow: 720 * time.Second}, guard.HeadersDraft11,
			map[string]string{guard.HeaderRateLimitPolicy: `"5-per-1h";q=5;w=3600`, guard.HeaderRateLimit: `"5-per-1h";r=4;t=720`}},
		{"a unit is sent as qu", core.Decision{Allowed: true, Limit: core.PerMinute(5000).WithUnit("tokens"), Remaining: 4000, EffectiveWindow: time.Minute}, guard.HeadersDraft11,
			map[string]string{guard.HeaderRateLimitPolicy: `"5000-tokens-per-1m";q=5000;qu="tokens";w=60`, guard.HeaderRateLimit: `"5000-tokens-per-1m";r=4000;t=60`}},
		{"draft-06", core.Decision{Allowed: true, Limit: lim, Remaining: 42, ResetAfter: time.Hour, EffectiveWindow: 17 * time.Second}, guard.HeadersDraft06,
			map[string]string{guard.HeaderRateLimitPolicy: "100000;w=90001", guard.HeaderRateLimitLimit: "100", guard.HeaderRateLimitRemaining: "42", guard.HeaderRateLimitReset: "17", guard.HeaderRateLimit: ""}},
		{"legacy", core.Decision{Allowed: true, Limit: lim, Remaining: 42, ResetAfter: time.Hour, EffectiveWindow: 17 * time.Second}, guard.HeadersLegacy,
			map[string]string{guard.HeaderXRateLimitLimit: "100", guard.HeaderXRateLimitRemaining: "42", guard.HeaderXRateLimitReset: "17", guard.HeaderRateLimitPolicy: ""}},
		{"none", core.Decision{Allowed: true, Limit: lim, Remaining: 42}, guard.HeadersNone,
			map[string]string{guard.HeaderRateLimitPolicy: "", guard.HeaderRateLimit: "", guard.HeaderXRateLimitLimit: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := headersFor(t, tt.d, tt.style)
			for k, want := range tt.want {
				if got := rec.header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestWindowIsExact checks q and w for periods that are not whole seconds:
// the same rate in integers, or, where they would not fit an sf-integer,
// w the period rounded up and q the most units w admits at the real rate.
func TestWindowIsExact(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	tests := []struct {
		name  string
		limit core.Limit
		q, w  int64 // exact; 0 where the rate cannot be sent exactly
	}{
		{"a whole number of seconds is sent as is", core.PerMinute(100), 100, 60},
		{"1.5 s is scaled to 3 s", core.Per(3, 1500*ms), 6, 3},
		{"100 ms is scaled to 1 s", core.Per(10, 100*ms), 100, 1},
		{"250 ms is scaled to 1 s", core.Per(7, 250*ms), 28, 1},
		{"1 µs is scaled to 1 s", core.Per(1, us), 1_000_000, 1},
		{"90.001 s is scaled to 90001 s", core.Per(100, 90*time.Second+ms), 100_000, 90_001},
		{"a quota too large to scale exactly is sent at a lower rate", core.Per(core.MaxQuota/2, time.Second+ms).WithAlgorithm(core.FixedWindow), 0, 0},
		{"a rate beyond an sf-integer per second is sent at a lower rate", core.Per(core.MaxQuota, ms).WithAlgorithm(core.FixedWindow), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.limit.Validate(); err != nil {
				t.Fatalf("%v: %v", tt.limit, err)
			}
			rec := headersFor(t, core.Decision{Allowed: true, Limit: tt.limit.Named("p"), Remaining: 1}, guard.HeadersDraft11)
			got := rec.header.Get(guard.HeaderRateLimitPolicy)
			var q, w int64
			if _, err := fmt.Sscanf(got, `"p";q=%d;w=%d`, &q, &w); err != nil {
				t.Fatalf("RateLimit-Policy = %q: %v", got, err)
			}
			real := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(tt.limit.Quota), big.NewInt(int64(time.Second))), big.NewInt(int64(tt.limit.Period)))
			sent := big.NewRat(q, w)
			if tt.q != 0 {
				if q != tt.q || w != tt.w {
					t.Errorf("RateLimit-Policy = %q, want q=%d;w=%d", got, tt.q, tt.w)
				}
				if sent.Cmp(real) != 0 {
					t.Errorf("q/w = %v per second, want the real %v", sent, real)
				}
				return
			}
			if q > 999_999_999_999_999 || w != int64((tt.limit.Period+time.Second-1)/time.Second) {
				t.Errorf("RateLimit-Policy = %q, want w the period rounded up and q an sf-integer", got)
			}
			// Never a higher rate than the real one, and the highest such q
			// (unless clamped to 15 digits).
			if sent.Cmp(real) > 0 {
				t.Errorf("q/w = %v per second, more than the real %v", sent, real)
			}
			if q < 999_999_999_999_999 && big.NewRat(q+1, w).Cmp(real) <= 0 {
				t.Errorf("q=%d;w=%d: q+1 would still not exceed the real rate %v", q, w, real)
			}
		})
	}
}

// Names are at most core.MaxNameLen bytes (core.New rejects longer ones),
// and so are the headers and bodies that carry them.
func TestLongNamesStayBounded(t *testing.T) {
	d := core.Decision{Allowed: false, Limit: core.PerHour(5).Named(strings.Repeat("n", core.MaxNameLen)), RetryAfter: time.Second}
	rec := headersFor(t, d, guard.HeadersDraft11)
	if got := len(rec.header.Get(guard.HeaderRateLimitPolicy)); got > core.MaxNameLen+40 {
		t.Errorf("RateLimit-Policy is %d bytes for a %d-byte name", got, core.MaxNameLen)
	}
	if len(rec.body) > core.MaxNameLen+400 {
		t.Errorf("429 body is %d bytes for a %d-byte name", len(rec.body), core.MaxNameLen)
	}
}

// RateLimit-Policy follows the limits of each key (WithLimitsFunc's
// tiers), as they alternate: tiers of different names, and tiers of one
// name and one quota whose windows differ, which the policy cache must
// not take for one another.
func TestPolicyFollowsPerKeyLimits(t *testing.T) {
	for _, tiers := range []struct {
		name           string
		base, pro      core.Limit
		wantBase, want string
	}{
		{"names", core.PerMinute(10).Named("free"), core.PerMinute(1000).Named("pro"), `"free";q=10;w=60`, `"pro";q=1000;w=60`},
		{"windows", core.PerMinute(10).Named("api"), core.PerSecond(10).Named("api"), `"api";q=10;w=60`, `"api";q=10;w=1`},
	} {
		t.Run(tiers.name, func(t *testing.T) {
			e := newEnv(t)
			lim, err := core.New(e.store, core.WithClock(e.clock), tiers.base, core.WithLimitsFunc(func(_ context.Context, key string) []core.Limit {
				if strings.HasPrefix(key, "pro") {
					return []core.Limit{tiers.pro}
				}
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			g := mustNew(t, lim, guard.WithKey(keyfuncs.Header("X-Key")))
			for i, key := range []string{"pro-1", "free-1", "free-1", "pro-2", "free-2"} {
				req := request("192.0.2.1:1")
				req.Header.Set("X-Key", key)
				rec, _ := served(t, g, req)
				want := tiers.wantBase
				if strings.HasPrefix(key, "pro") {
					want = tiers.want
				}
				if got := rec.header.Get(guard.HeaderRateLimitPolicy); got != want {
					t.Errorf("request %d (%s): RateLimit-Policy = %q, want %q", i, key, got, want)
				}
			}
		})
	}
}

func TestFailOpenSendsNoInventedNumbers(t *testing.T) {
	perMinute, perHour := fixed(2, time.Minute, "per-minute"), fixed(3, time.Hour, "per-hour")
	const both = `"per-minute";q=2;w=60, "per-hour";q=3;w=3600`
	absent := func(names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n] = ""
		}
		return m
	}
	tests := []struct {
		name  string
		style guard.HeaderStyle
		want  map[string]string // "" means absent
	}{
		{"draft-11 lists the configured policies and no RateLimit item", guard.HeadersDraft11,
			map[string]string{guard.HeaderRateLimitPolicy: both, guard.HeaderRateLimit: ""}},
		{"draft-06 sends nothing", guard.HeadersDraft06,
			absent(guard.HeaderRateLimitPolicy, guard.HeaderRateLimitLimit, guard.HeaderRateLimitRemaining, guard.HeaderRateLimitReset)},
		{"legacy sends nothing", guard.HeadersLegacy,
			absent(guard.HeaderXRateLimitLimit, guard.HeaderXRateLimitRemaining, guard.HeaderXRateLimitReset)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			st := &flakyStore{Store: e.store}
			st.down.Store(true)
			lim, err := core.New(st, core.WithClock(e.clock), perMinute, perHour, core.WithFailurePolicy(core.FailOpen))
			if err != nil {
				t.Fatal(err)
			}
			g := mustNew(t, lim, guard.WithHeaders(tt.style))
			for i := range 3 { // more than the quota: the store decides nothing
				rec, ran := served(t, g, request("192.0.2.1:1"))
				if !ran || rec.status != 200 {
					t.Fatalf("request %d: status %d, ran %v; want 200 under FailOpen", i, rec.status, ran)
				}
				for k, want := range tt.want {
					if got := rec.header.Get(k); got != want {
						t.Errorf("request %d: %s = %q, want %q", i, k, got, want)
					}
				}
			}
		})
	}
}

func TestFailOpenAmongMeasuredDecisions(t *testing.T) {
	setup := func(t *testing.T, style guard.HeaderStyle) (*guard.Guard, *flakyStore) {
		e := newEnv(t)
		st := &flakyStore{Store: e.store}
		perUser, err := core.New(st, core.WithClock(e.clock), fixed(10, time.Minute, "per-user"),
			core.WithFailurePolicy(core.FailOpen), core.WithBreaker(core.Breaker{Disabled: true}))
		if err != nil {
			t.Fatal(err)
		}
		return mustNew(t, e.limiter(t, fixed(5, time.Minute, "per-ip")), guard.WithHeaders(style),
			guard.WithRule(perUser, keyfuncs.Static("alice"))), st
	}
	t.Run("draft-11 lists every policy, and items only for the measured rule", func(t *testing.T) {
		g, st := setup(t, guard.HeadersDraft11)
		const policy = `"per-ip";q=5;w=60, "per-user";q=10;w=60`
		steps := []struct {
			down      bool
			rateLimit string
		}{
			{false, `"per-ip";r=4;t=60, "per-user";r=9;t=60`},
			{true, `"per-ip";r=3;t=60`},
			{true, `"per-ip";r=2;t=60`},
			{false, `"per-ip";r=1;t=60, "per-user";r=8;t=60`}, // per-user counted none of the fail-open ones
		}
		for i, s := range steps {
			st.down.Store(s.down)
			rec, _ := served(t, g, request("192.0.2.1:1"))
			if got := rec.header.Get(guard.HeaderRateLimitPolicy); got != policy {
				t.Errorf("request %d (store down %v): RateLimit-Policy = %q, want %q", i, s.down, got, policy)
			}
			if got := rec.header.Get(guard.HeaderRateLimit); got != s.rateLimit {
				t.Errorf("request %d (store down %v): RateLimit = %q, want %q", i, s.down, got, s.rateLimit)
			}
		}
	})
	t.Run("draft-06 reports the measured rule only", func(t *testing.T) {
		g, st := setup(t, guard.HeadersDraft06)
		st.down.Store(true)
		rec, _ := served(t, g, request("192.0.2.1:1"))
		want := map[string]string{guard.HeaderRateLimitPolicy: "5;w=60", guard.HeaderRateLimitLimit: "5", guard.HeaderRateLimitRemaining: "4", guard.HeaderRateLimitReset: "60"}
		for k, v := range want {
			if got := rec.header.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
	})
}

func TestFailOpenListsTheKeysOwnLimits(t *testing.T) {
	e := newEnv(t)
	st := &flakyStore{Store: e.store}
	st.down.Store(true)
	pro := core.PerMinute(1000).Named("pro")
	lim, err := core.New(st, core.WithClock(e.clock), core.PerMinute(10).Named("free"), core.WithFailurePolicy(core.FailOpen),
		core.WithLimitsFunc(func(_ context.Context, key string) []core.Limit {
			if strings.HasPrefix(key, "pro") {
				return []core.Limit{pro}
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	g := mustNew(t, lim, guard.WithKey(keyfuncs.Header("X-Key")))
	for _, tt := range []struct{ key, want string }{{"pro-1", `"pro";q=1000;w=60`}, {"free-1", `"free";q=10;w=60`}, {"pro-2", `"pro";q=1000;w=60`}} {
		req := request("192.0.2.1:1")
		req.Header.Set("X-Key", tt.key)
		rec, _ := served(t, g, req)
		if got := rec.header.Get(guard.HeaderRateLimitPolicy); got != tt.want {
			t.Errorf("%s: RateLimit-Policy = %q, want %q", tt.key, got, tt.want)
		}
		if got := rec.header.Get(guard.HeaderRateLimit); got != "" {
			t.Errorf("%s: RateLimit = %q, want none", tt.key, got)
		}
	}
}

// FuzzHeaders feeds hostile decisions to the encoder: whatever the store
// says, of any valid limit (names are printable ASCII: core.New rejects
// others), every header value is printable ASCII (no CR, LF or NUL that
// could split or smuggle a header) and the Guard does not panic. The
// conformance module parses the same output with an RFC 9651 parser.
func FuzzHeaders(f *testing.F) {
	f.Add("per-minute", int64(100), int64(60e9), int64(42), int64(17e9), int64(0), false, uint8(0), uint8(0))
	f.Add("a\"b\\c\r\nd", int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), true, uint8(1), uint8(1))
	f.Add("\xff\x00", int64(1)<<62, int64(core.Never), int64(1)<<62, int64(core.Never), int64(core.Never), true, uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, name string, quota, period, rem, reset, retry int64, denied bool, style, source uint8) {
		d := core.Decision{
			Allowed:         !denied,
			Limit:           validLimit(name, quota, period),
			Remaining:       rem,
			ResetAfter:      time.Duration(reset),
			EffectiveWindow: time.Duration(reset / 3),
			RetryAfter:      time.Duration(retry),
			Source:          core.Source(source % 3),
		}
		rec := headersFor(t, d, guard.HeaderStyle(style%4))
		for k, vs := range rec.header {
			for _, v := range vs {
				for i := 0; i < len(v); i++ {
					if v[i] < 0x20 || v[i] > 0x7e {
						t.Fatalf("%s: byte %#x at %d in %q", k, v[i], i, v)
					}
				}
			}
		}
		if denied && !utf8.ValidString(rec.body) {
			t.Fatalf("body is not UTF-8: %q", rec.body)
		}
	})
}

// validLimit makes a valid limit of fuzzed numbers: a printable name of at
// most core.MaxNameLen bytes, a quota and a period within bounds.
func validLimit(name string, quota, period int64) core.Limit {
	b := []byte(name)
	if len(b) > core.MaxNameLen {
		b = b[:core.MaxNameLen]
	}
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	q := min(max(quota, 1), core.MaxQuota)
	p := time.Duration(min(max(period, int64(time.Microsecond)), int64(core.MaxPeriod))).Truncate(time.Microsecond)
	l := core.Per(q, p).Named(string(b))
	if l.Validate() != nil { // too large to compute exactly
		l.Quota = 1
	}
	return l
}

// A cost above a limit's capacity can never pass: its 429 has a problem
// type of its own giving the cost and the capacity, no Retry-After, and no
// RateLimit item, whose quota would invite a retry that cannot succeed.
func TestACostThatCanNeverPass(t *testing.T) {
	for _, l := range []core.Limit{core.PerMinute(5).WithAlgorithm(core.FixedWindow), core.PerMinute(100).WithBurst(5).WithAlgorithm(core.TokenBucket)} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			e := newEnv(t)
			lim := e.limiter(t, l.Named("m").WithUnit("tokens"))
			var dn guard.Denial
			g := mustNew(t, lim, guard.WithCost(6), guard.WithOnDenied(func(_ keyfuncs.Request, d *guard.Denial) { dn = *d }))
			rec, ran := served(t, g, request("192.0.2.1:1"))
			if ran || rec.status != 429 {
				t.Fatalf("status %d, ran %v; want 429", rec.status, ran)
			}
			capacity := lim.Limits(context.Background(), "")[0].Capacity()
			if dn.Capacity != capacity || dn.RetryAfter != 0 {
				t.Errorf("Denial{Capacity: %d, RetryAfter: %v}, want {%d, 0}", dn.Capacity, dn.RetryAfter, capacity)
			}
			for _, h := range []string{guard.HeaderRetryAfter, guard.HeaderRateLimit} {
				if v := rec.header.Get(h); v != "" {
					t.Errorf("%s = %q, want none", h, v)
				}
			}
			if got := rec.header.Get(guard.HeaderRateLimitPolicy); got == "" {
				t.Error("RateLimit-Policy missing: the policy is still listed")
			}
			var p struct {
				Type     string   `json:"type"`
				Detail   string   `json:"detail"`
				Cost     int64    `json:"cost"`
				Capacity int64    `json:"capacity"`
				Violated []string `json:"violated-policies"`
			}
			if err := json.Unmarshal([]byte(rec.body), &p); err != nil {
				t.Fatalf("body %q: %v", rec.body, err)
			}
			if p.Type != guard.ProblemTypeCapacity || p.Cost != 6 || p.Capacity != capacity || !slices.Equal(p.Violated, []string{"m"}) ||
				!strings.Contains(p.Detail, "6 tokens") || !strings.Contains(p.Detail, strconv.FormatInt(capacity, 10)) {
				t.Errorf("body %s, want the capacity problem with cost 6 and capacity %d", rec.body, capacity)
			}
			// It took nothing: a request within the capacity passes.
			if rec, _ := served(t, mustNew(t, lim, guard.WithCost(capacity)), request("192.0.2.1:1")); rec.status != 200 {
				t.Errorf("a cost of %d after it: status %d, want 200", capacity, rec.status)
			}
		})
	}
}

// Retry-After is never earlier than the t of the item of the limit that
// denied, even where the store says the cost could pass sooner than that.
func TestRetryAfterCoversTheEffectiveWindow(t *testing.T) {
	d := core.Decision{Allowed: false, Limit: fixed(1, time.Minute, "m"), RetryAfter: 2 * time.Second, EffectiveWindow: 9500 * time.Millisecond}
	rec := headersFor(t, d, guard.HeadersDraft11)
	if got, want := rec.header.Get(guard.HeaderRetryAfter), "10"; got != want {
		t.Errorf("Retry-After = %q, want %q (t=%s)", got, want, rec.header.Get(guard.HeaderRateLimit))
	}
}

// Legacy X-RateLimit-Reset is a delta by default, and a Unix time, rounded
// up, on request.
func TestLegacyReset(t *testing.T) {
	d := core.Decision{Allowed: true, Limit: fixed(10, time.Minute, "m"), Remaining: 3, EffectiveWindow: 17*time.Second + time.Millisecond}
	clock := guardtest.NewClock(guardtest.Epoch.Add(400 * time.Millisecond))
	for _, tt := range []struct {
		name string
		opts []guard.Option
		want int64
	}{
		{"by default a delta in seconds", nil, 18},
		{"ResetDelta is the default", []guard.Option{guard.WithLegacyReset(guard.ResetDelta)}, 18},
		{"ResetUnix is the Unix time of the reset, rounded up", []guard.Option{guard.WithLegacyReset(guard.ResetUnix), guard.WithClock(clock)}, guardtest.Epoch.Unix() + 1 + 18},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lim := limiterOn(t, stubStore{d}, clock, d.Limit)
			g := mustNew(t, lim, append([]guard.Option{guard.WithHeaders(guard.HeadersLegacy)}, tt.opts...)...)
			rec, _ := served(t, g, request("192.0.2.1:1"))
			if got := rec.header.Get(guard.HeaderXRateLimitReset); got != strconv.FormatInt(tt.want, 10) {
				t.Errorf("X-RateLimit-Reset = %q, want %d", got, tt.want)
			}
		})
	}
	if _, err := guard.New(limiterOn(t, stubStore{d}, clock, d.Limit), guard.WithLegacyReset(guard.ResetFormat(9))); !errors.Is(err, guard.ErrInvalidOption) {
		t.Errorf("WithLegacyReset(9): err = %v, want ErrInvalidOption", err)
	}
	if _, err := guard.New(limiterOn(t, stubStore{d}, clock, d.Limit), guard.WithClock(nil)); !errors.Is(err, guard.ErrInvalidOption) {
		t.Errorf("WithClock(nil): err = %v, want ErrInvalidOption", err)
	}
}

// Draft-06 forbids two policies with the same quota: the one with the
// longest window stays.
func TestDraft06ListsOnePolicyPerQuota(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, fixed(10, time.Second, "s"), fixed(10, time.Hour, "h"), fixed(50, time.Minute, "m"))
	rec, _ := served(t, mustNew(t, lim, guard.WithHeaders(guard.HeadersDraft06)), request("192.0.2.1:1"))
	if got, want := rec.header.Get(guard.HeaderRateLimitPolicy), "10;w=3600, 50;w=60"; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
}
