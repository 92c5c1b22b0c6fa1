package core_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/memstore"
)

func TestNewRejects(t *testing.T) {
	store := memstore.New(memstore.WithSweepInterval(0))
	defer store.Close()
	tests := []struct {
		name  string
		store core.Store
		opts  []core.Option
		is    error // nil: any error
	}{
		{"a nil store", nil, []core.Option{core.PerSecond(1)}, core.ErrInvalidOption},
		{"a typed nil store", (*memstore.Store)(nil), []core.Option{core.PerSecond(1)}, core.ErrInvalidOption},
		{"a zero timeout", store, []core.Option{core.PerSecond(1), core.WithTimeout(0)}, core.ErrInvalidOption},
		{"a negative timeout", store, []core.Option{core.PerSecond(1), core.WithTimeout(-time.Second)}, core.ErrInvalidOption},
		{"a negative breaker setting", store, []core.Option{core.PerSecond(1), core.WithBreaker(core.Breaker{CoolDown: -1})}, core.ErrInvalidOption},
		{"a negative consecutive count", store, []core.Option{core.PerSecond(1), core.WithBreaker(core.Breaker{Consecutive: -1})}, core.ErrInvalidOption},
		{"a failure rate above 1", store, []core.Option{core.PerSecond(1), core.WithBreaker(core.Breaker{FailureRate: 1.5})}, core.ErrInvalidOption},
		{"a failure rate that is not a number", store, []core.Option{core.PerSecond(1), core.WithBreaker(core.Breaker{FailureRate: math.NaN()})}, core.ErrInvalidOption},
		{"a nil fallback store", store, []core.Option{core.PerSecond(1), core.WithFailurePolicy(core.Fallback(nil))}, core.ErrInvalidOption},
		{"a fleet of zero", store, []core.Option{core.PerSecond(1), core.WithFailurePolicy(core.Fallback(store, core.FleetSize(0)))}, core.ErrInvalidOption},
		{"a nil error hook", store, []core.Option{core.PerSecond(1), core.WithErrorHook(nil)}, core.ErrInvalidOption},
		{"a nil limits function", store, []core.Option{core.PerSecond(1), core.WithLimitsFunc(nil)}, core.ErrInvalidOption},
		{"a nil clock", store, []core.Option{core.PerSecond(1), core.WithClock(nil)}, core.ErrInvalidOption},
		{"no limits and no limits function", store, nil, core.ErrInvalidOp},
		{"only nil options", store, []core.Option{nil, nil}, core.ErrInvalidOp},
		{"an invalid limit", store, []core.Option{core.PerSecond(1), core.PerMinute(0)}, core.ErrInvalidLimit},
		{"a limit with an invalid name", store, []core.Option{core.PerSecond(1).Named("a\r\nb")}, core.ErrInvalidLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is an error", func(t *testing.T) {
			lim, err := core.New(tt.store, tt.opts...)
			if err == nil || lim != nil {
				t.Fatalf("New = %v, %v; want nil and an error", lim, err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("New error = %v, want one wrapping %v", err, tt.is)
			}
		})
	}
}

func TestLimiterNamesItsLimits(t *testing.T) {
	lim := newLimiter(t, newManualClock(t0), core.PerMinute(100), core.PerHour(1000).Named("hourly"), nil)
	ls := lim.Limits(context.Background(), "k")
	if len(ls) != 2 || ls[0].Name != "100-per-1m" || ls[1].Name != "hourly" {
		t.Errorf("Limits = %+v, want names \"100-per-1m\" and \"hourly\"", ls)
	}
	if lim.Store() == nil {
		t.Error("Store() = nil")
	}
}

// The Limiter passes its clock's time with every operation: the store's own
// clock (here the real one) is not used.
func TestLimiterUsesItsClock(t *testing.T) {
	clock := newManualClock(t0)
	lim := newLimiter(t, clock, core.PerSecond(2).WithAlgorithm(core.FixedWindow))
	ctx := context.Background()
	steps := []struct {
		at   time.Duration
		want result
	}{
		{0, ok(1, time.Second)},
		{999 * time.Millisecond, ok(0, time.Millisecond)},
		{999 * time.Millisecond, denied(0, time.Millisecond, time.Millisecond)},
		{time.Second, ok(1, time.Second)},
	}
	for _, s := range steps {
		clock.Set(t0.Add(s.at))
		d, err := lim.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if got := resultOf(d); got != s.want {
			t.Errorf("Allow(t0+%v) = %v, want %v", s.at, got, s.want)
		}
	}
}

// Limits per key, for plans: the function's limits replace the Limiter's
// own; when it returns none, the Limiter's own apply.
func TestWithLimitsFunc(t *testing.T) {
	free := core.PerMinute(3).Named("free")
	pro := core.PerMinute(100).Named("pro")
	plans := func(ctx context.Context, key string) []core.Limit {
		switch {
		case strings.HasPrefix(key, "free:"):
			return []core.Limit{free}
		case strings.HasPrefix(key, "pro:"):
			return []core.Limit{pro, core.PerSecond(10).Named("pro-burst")}
		}
		return nil
	}
	lim := newLimiter(t, newManualClock(t0), core.PerMinute(1), core.WithLimitsFunc(plans))
	ctx := context.Background()
	count := func(key string) (n int, last core.Decision) {
		for range 20 {
			d, err := lim.Allow(ctx, key)
			if err != nil {
				t.Fatalf("Allow(%q): %v", key, err)
			}
			if d.Allowed {
				n++
			}
			last = d
		}
		return n, last
	}
	if n, d := count("free:alice"); n != 3 || d.Limit.Name != "free" {
		t.Errorf("free:alice: %d of 20 allowed, bound by %q; want 3 by \"free\"", n, d.Limit.Name)
	}
	if n, d := count("pro:bob"); n != 10 || d.Limit.Name != "pro-burst" || len(d.States) != 2 {
		t.Errorf("pro:bob: %d of 20 allowed, bound by %q; want 10 by \"pro-burst\" with 2 states", n, d.Limit.Name)
	}
	if n, d := count("anonymous"); n != 1 || d.Limit.Name != "1-per-1m" {
		t.Errorf("anonymous: %d of 20 allowed, bound by %q; want 1 by the Limiter's own \"1-per-1m\"", n, d.Limit.Name)
	}
	if ls := lim.Limits(ctx, "free:x"); len(ls) != 1 || ls[0] != free {
		t.Errorf("Limits(free:x) = %v, want [free]", ls)
	}
}

// An invalid limit from the function fails the operation.
func TestWithLimitsFuncInvalidLimit(t *testing.T) {
	tests := []struct {
		name  string
		limit core.Limit
		with  []core.Limit // other limits returned beside it
	}{
		{"a zero quota", core.PerMinute(0), nil},
		{"a non-whole-µs period", core.Per(1, 1500*time.Nanosecond), nil},
		// The doc of WithLimitsFunc: "Limits it returns are validated on
		// every call and an invalid one fails the operation." A name that
		// Validate rejects would otherwise reach the RateLimit headers.
		{"a name with a newline", core.PerMinute(5).Named("free\r\nX-Injected: 1"), nil},
		{"a name that is too long", core.PerMinute(5).Named(strings.Repeat("n", core.MaxNameLen+1)), nil},
		// As New rejects them: the headers could not tell them apart.
		{"a name another limit has", core.PerHour(50).Named("free"), []core.Limit{core.PerMinute(5).Named("free")}},
		// A derived name another limit has is named apart instead: see
		// TestLimitsFuncDuplicateNames.
	}
	for _, tt := range tests {
		t.Run(tt.name+" fails the operation", func(t *testing.T) {
			limits := append([]core.Limit{tt.limit}, tt.with...)
			fn := func(context.Context, string) []core.Limit { return limits }
			lim := newLimiter(t, newManualClock(t0), core.WithLimitsFunc(fn))
			if d, err := lim.Allow(context.Background(), "k"); !errors.Is(err, core.ErrInvalidLimit) {
				t.Errorf("Allow with limit %+v = %v, %v; want an error wrapping ErrInvalidLimit", tt.limit, resultOf(d), err)
			}
		})
	}
}

// A limits function that fails every operation given its answer is a
// configuration error a developer must see at the first call: each case
// fails the operation and logs at ERROR, naming the Limiter.
func TestLimitsFuncErrorsAreLogged(t *testing.T) {
	for _, tt := range []struct {
		name   string
		limits []core.Limit
		want   error
		line   string
	}{
		{"none, and the Limiter has none", nil, core.ErrInvalidOp, "the limits function returned none, and the Limiter has none"},
		{"an invalid name", []core.Limit{core.PerMinute(5).Named("a b\n")}, core.ErrInvalidLimit, "invalid limits from WithLimitsFunc"},
		{"two of one name", []core.Limit{core.PerMinute(5).Named("x"), core.PerHour(50).Named("x")}, core.ErrInvalidLimit, "invalid limits from WithLimitsFunc"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c capture
			fn := func(context.Context, string) []core.Limit { return tt.limits }
			lim := newLimiter(t, newManualClock(t0), core.WithLimitsFunc(fn), core.WithName("plans"), core.WithLogger(slog.New(&c)))
			if d, err := lim.Allow(context.Background(), "k"); !errors.Is(err, tt.want) {
				t.Fatalf("Allow = %v, %v; want an error wrapping %v", resultOf(d), err, tt.want)
			}
			lines := c.lines()
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "ERROR ") || !strings.Contains(lines[0], tt.line) || !strings.Contains(lines[0], "limiter=plans") {
				t.Errorf("log = %q, want one ERROR line %q naming the limiter", lines, tt.line)
			}
		})
	}
}

// Post-hoc settlement through the Limiter: admit at an estimate, then
// Charge the overage or Refund the unused part.
func TestLimiterPostHocSettlement(t *testing.T) {
	clock := newManualClock(t0)
	lim := newLimiter(t, clock, core.PerMinute(100).WithAlgorithm(core.FixedWindow))
	ctx := context.Background()
	steps := []struct {
		name string
		do   func() (core.Decision, error)
		want result
	}{
		{"admit at an estimate of 10", func() (core.Decision, error) { return lim.AllowN(ctx, "k", 10) }, ok(90, time.Minute)},
		{"the real cost was 50: charge 40", func() (core.Decision, error) { return lim.Charge(ctx, "k", 40) }, ok(50, time.Minute)},
		{"admit another at 10", func() (core.Decision, error) { return lim.AllowN(ctx, "k", 10) }, ok(40, time.Minute)},
		{"it failed: refund its 10", func() (core.Decision, error) { return lim.Refund(ctx, "k", 10) }, ok(50, time.Minute)},
		{"a huge response: charge 80, 30 over", func() (core.Decision, error) { return lim.Charge(ctx, "k", 80) }, denied(0, time.Minute, time.Minute)},
		{"a peek sees the overage", func() (core.Decision, error) { return lim.Peek(ctx, "k") }, denied(0, time.Minute, time.Minute)},
		{"a request of cost 1 waits for the window", func() (core.Decision, error) { return lim.Allow(ctx, "k") }, denied(0, time.Minute, time.Minute)},
		{"reset forgets it all", func() (core.Decision, error) { return lim.Reset(ctx, "k") }, ok(100, 0)},
		{"and the whole quota is back", func() (core.Decision, error) { return lim.PeekN(ctx, "k", 100) }, ok(100, 0)},
	}
	for _, s := range steps {
		d, err := s.do()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := resultOf(d); got != s.want {
			t.Errorf("%s: got %v, want %v", s.name, got, s.want)
		}
	}
}

// Limiters configured differently do not share a key's state on one store;
// Limiters configured alike (a fleet's processes) do, and WithName decides.
func TestLimitersOnOneStoreAreScopedByTheirLimits(t *testing.T) {
	store := memstore.New(memstore.WithSweepInterval(0))
	defer store.Close()
	ctx := context.Background()
	mk := func(opts ...core.Option) *core.Limiter {
		t.Helper()
		l, err := core.New(store, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	app := mk(core.PerMinute(5))
	search := mk(core.PerMinute(10)) // same algorithm and period: same layout
	twin := mk(core.PerMinute(5))    // configured as app
	named := mk(core.PerMinute(5), core.WithName("other"))
	if app.Scope() == search.Scope() || app.Scope() != twin.Scope() || named.Scope() != "other" {
		t.Fatalf("scopes: app %q search %q twin %q named %q; want app = twin ≠ search, named = other", app.Scope(), search.Scope(), twin.Scope(), named.Scope())
	}
	for range 4 {
		if _, err := app.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		lim  *core.Limiter
		want int64
	}{{"search", search, 9}, {"twin", twin, 0}, {"named", named, 4}} {
		d, err := c.lim.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if d.Remaining != c.want {
			t.Errorf("%s.Allow after 4 of app's: Remaining = %d, want %d", c.name, d.Remaining, c.want)
		}
	}
	// A unit is part of a limit's identity: 5 tokens a minute are not 5
	// requests a minute, and do not share their state.
	tokens := mk(core.PerMinute(5).Named(app.Name()).WithUnit("tokens"))
	plain := mk(core.PerMinute(5).Named(app.Name()))
	if tokens.Scope() == plain.Scope() {
		t.Errorf("a limit with a unit and one without share the scope %q", tokens.Scope())
	}
	if _, err := core.New(store, core.PerMinute(5), core.WithName("bad\nname")); err == nil {
		t.Error("WithName with a control character: New succeeded, want an error")
	}
}

// Logs and metrics name a Limiter readably, from its limits as the
// RateLimit-Policy header does, while the scope that keys its state in a
// store stays the digest it always was: an upgrade keeps every count.
func TestDefaultNameIsReadableAndTheScopeStable(t *testing.T) {
	store := memstore.New(memstore.WithSweepInterval(0))
	defer store.Close()
	for _, tt := range []struct {
		opts  []core.Option
		name  string
		scope string // "": not checked
	}{
		{[]core.Option{core.PerMinute(100), core.PerHour(1000)}, "100-per-1m+1000-per-1h", "l2w13je75qywlh"},
		{[]core.Option{core.PerSecond(10)}, "10-per-1s", "lu1tom05rvi5n"},
		{[]core.Option{core.PerMinute(20).Named("search"), core.InFlight(3, time.Minute)}, "search+3-in-flight", ""},
		{[]core.Option{core.PerSecond(10), core.WithName("api")}, "api", "api"},
		{[]core.Option{core.WithLimitsFunc(func(context.Context, string) []core.Limit { return nil })}, "", ""},
	} {
		lim, err := core.New(store, tt.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if lim.Name() != tt.name {
			t.Errorf("Name() = %q, want %q", lim.Name(), tt.name)
		}
		if tt.scope != "" && lim.Scope() != tt.scope {
			t.Errorf("%s: Scope() = %q, want %q, the scope earlier versions kept its state under", tt.name, lim.Scope(), tt.scope)
		}
	}
}

// Two limits of one Limiter with the same name would make the RateLimit
// headers ambiguous; New says so. Errors name the problem once.
func TestNewRejectsDuplicateNamesAndSaysWhy(t *testing.T) {
	store := memstore.New(memstore.WithSweepInterval(0))
	defer store.Close()
	_, err := core.New(store, core.PerSecond(2).Named("a"), core.PerMinute(3).Named("a"))
	if !errors.Is(err, core.ErrInvalidLimit) || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("New with two limits named a: err = %v, want ErrInvalidLimit naming \"a\"", err)
	}
	_, err = core.New(store, core.PerSecond(0))
	if err == nil || strings.Count(err.Error(), "tollgate:") != 1 {
		t.Errorf("New with a zero quota: err = %v, want one error with one \"tollgate:\" prefix", err)
	}
}

// A Limiter with one set of limits on an in-process store, no clock, no
// observer and no deny cache takes a shorter path for Allow and AllowN
// (through the store's TakeBrief for one limit, memstore's): it decides as the
// general path does, errors included. Here the store's clock and the other
// Limiter's clock are one manual clock.
func TestTheDirectPathDecidesAsTheGeneralOne(t *testing.T) {
	ctx := context.Background()
	for _, alg := range core.Algorithms() {
		for _, n := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s with %d limits", alg, n), func(t *testing.T) {
				testDirectPath(ctx, t, alg, n)
			})
		}
	}
}

func testDirectPath(ctx context.Context, t *testing.T, alg core.Algorithm, n int) {
	clock := newManualClock(t0)
	one := core.PerSecond(5).WithAlgorithm(alg)
	if alg.HasBurst() {
		one = one.WithBurst(3)
	}
	limits := []core.Option{one}
	if alg == core.Concurrency {
		limits = []core.Option{core.InFlight(5, time.Second)}
	}
	if n == 2 {
		limits = append(limits, core.PerMinute(40).Named("minute"))
	}
	// A rival of other limits under the same name shares each key's entry
	// on each store: the entry is laid out for one plan, then the other.
	limits = append(limits, core.WithName("shared"))
	rivalLimits := []core.Option{core.PerMinute(7).WithAlgorithm(alg), core.WithName("shared")}
	if alg == core.Concurrency {
		rivalLimits[0] = core.InFlight(2, time.Minute)
	}
	directStore, generalStore := memstore.New(memstore.WithSweepInterval(0), memstore.WithClock(clock)), memstore.New(memstore.WithSweepInterval(0))
	direct, err := core.New(directStore, limits...)
	if err != nil {
		t.Fatal(err)
	}
	general, err := core.New(generalStore, append(limits, core.WithClock(clock))...)
	if err != nil {
		t.Fatal(err)
	}
	directRival, err := core.New(directStore, rivalLimits...)
	if err != nil {
		t.Fatal(err)
	}
	generalRival, err := core.New(generalStore, append(rivalLimits, core.WithClock(clock))...)
	if err != nil {
		t.Fatal(err)
	}
	if !core.Direct(direct) || core.Direct(general) {
		t.Fatalf("Direct(direct), Direct(general) = %v, %v; want true, false", core.Direct(direct), core.Direct(general))
	}
	if got, want := core.TakesInBrief(direct), n == 1; got != want {
		t.Fatalf("TakesInBrief(direct) with %d limits = %v, want %v", n, got, want)
	}
	check := func(step string, cost int64, key string) {
		t.Helper()
		var d1, d2 core.Decision
		var err1, err2 error
		if cost == 1 {
			d1, err1 = direct.Allow(ctx, key)
			d2, err2 = general.Allow(ctx, key)
		} else {
			d1, err1 = direct.AllowN(ctx, key, cost)
			d2, err2 = general.AllowN(ctx, key, cost)
		}
		if !reflect.DeepEqual(d1, d2) || (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("%s: AllowN(%q, %d) = %+v, %v on the direct path, want %+v, %v", step, key, cost, d1, err1, d2, err2)
		}
	}
	costs := []int64{1, 1, 2, 0, 4, 1, 9, -1, 1, 3}
	// A key longer than the store keeps as it is (memstore.DefaultMaxKeyLen)
	// is kept by its digest, and a key of the digest's bytes is another.
	long := strings.Repeat("k", memstore.DefaultMaxKeyLen+1)
	digest := sha256.Sum256([]byte(long))
	keys := []string{"a", "b", "", long, string(digest[:])}
	for i := range 200 {
		clock.Set(t0.Add(time.Duration(i*i%997) * 7 * time.Millisecond))
		key := keys[i%len(keys)]
		check(fmt.Sprintf("step %d", i), costs[i%len(costs)], key)
		if i%5 == 0 && key != "" {
			d1, err1 := directRival.Allow(ctx, key)
			d2, err2 := generalRival.Allow(ctx, key)
			if !reflect.DeepEqual(d1, d2) || err1 != nil || err2 != nil {
				t.Fatalf("step %d: the rival's Allow(%.8q) = %+v, %v on the direct path, want %+v, %v", i, key, d1, err1, d2, err2)
			}
		}
	}
	direct.Store().Close()
	general.Store().Close()
	check("after Close", 1, "a")
}

// WithLimitsFunc's limits that New never sees: unnamed ones whose derived
// names collide are named apart, so that they decide; two limits named
// alike on purpose fail every call, and the first call logs why, naming
// the Limiter.
func TestLimitsFuncDuplicateNames(t *testing.T) {
	for _, tt := range []struct {
		name   string
		limits []core.Limit
		want   []string // the names a Decision's headers use; nil: an error
	}{
		{"a sliding window and a GCRA limit of one rate are named by algorithm",
			[]core.Limit{core.PerMinute(10), core.PerMinute(10).WithAlgorithm(core.GCRA)},
			[]string{"10-per-1m", "10-per-1m-gcra"}},
		{"identical limits are named by algorithm, then by place",
			[]core.Limit{core.PerSecond(10), core.PerSecond(10), core.PerSecond(10)},
			[]string{"10-per-1s", "10-per-1s-sliding-window", "10-per-1s-sliding-window-3"}},
		{"a named limit keeps its name and an unnamed one moves aside",
			[]core.Limit{core.PerSecond(10), core.PerMinute(5).Named("10-per-1s")},
			[]string{"10-per-1s-sliding-window", "10-per-1s"}},
		{"two limits named alike are an error", []core.Limit{core.PerSecond(10).Named("a"), core.PerMinute(5).Named("a")}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logged logBuffer // the count of the repeated line is written a second later
			logger := slog.New(slog.NewTextHandler(&logged, nil))
			store := memstore.New(memstore.WithSweepInterval(0))
			defer store.Close()
			lim, err := core.New(store, core.WithName("tiers"), core.WithLogger(logger),
				core.WithLimitsFunc(func(context.Context, string) []core.Limit { return tt.limits }))
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				d, err := lim.Allow(context.Background(), "k")
				if tt.want == nil {
					if !errors.Is(err, core.ErrInvalidLimit) {
						t.Fatalf("Allow = %v, want ErrInvalidLimit", err)
					}
					continue
				}
				if err != nil || !d.Allowed {
					t.Fatalf("Allow = %+v, %v; want allowed", d, err)
				}
				var got []string
				d.Each(func(s core.LimitState) { got = append(got, s.Limit.Name) })
				if strings.Join(got, ",") != strings.Join(tt.want, ",") {
					t.Errorf("decided under limits named %q, want %q", got, tt.want)
				}
			}
			lines := strings.Count(logged.String(), "level=ERROR")
			if tt.want == nil && (lines != 1 || !strings.Contains(logged.String(), "limiter=tiers") || !strings.Contains(logged.String(), `two limits named \"a\"`)) {
				t.Errorf("log after two failing calls:\n%s\nwant one ERROR line naming the limiter and the duplicate name", logged.String())
			}
			if tt.want != nil && lines != 0 {
				t.Errorf("log:\n%s\nwant no error", logged.String())
			}
		})
	}
}

// manualLimiter returns a Limiter of opts over a fresh memstore whose time
// is a manual clock at t0: the store's, so that the Limiter goes straight
// to it (core.Direct), or, when clocked, the Limiter's own (the general
// path, as with an observer or a deny cache).
func manualLimiter(t *testing.T, clocked bool, opts ...core.Option) (*core.Limiter, *manualClock) {
	t.Helper()
	clock := newManualClock(t0)
	opts = slices.Clone(opts)
	sopts := []memstore.Option{memstore.WithSweepInterval(0)}
	if clocked {
		opts = append(opts, core.WithClock(clock))
	} else {
		sopts = append(sopts, memstore.WithClock(clock))
	}
	store := memstore.New(sopts...)
	t.Cleanup(func() { store.Close() })
	lim, err := core.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim, clock
}

// A decision on several limits allocates once, for its States, and the
// States of each Decision are its own: a later decision changes nothing in
// an earlier one's, and an append to them writes to memory of their own.
// Both ways to the store are covered: the direct path (AllowN) and the
// general one (Peek, and every op of a Limiter with a clock).
func TestSeveralLimitsDecideInOneAllocation(t *testing.T) {
	ctx := context.Background()
	all := []core.Option{core.PerSecond(1 << 30), core.PerMinute(1 << 30).WithAlgorithm(core.GCRA),
		core.PerHour(1 << 20).WithAlgorithm(core.FixedWindow), core.PerMinute(1 << 25).WithAlgorithm(core.TokenBucket),
		core.PerDay(1 << 30)}
	for n := 2; n <= len(all); n++ {
		for _, clocked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d limits, clock %v", n, clocked), func(t *testing.T) {
				lim, _ := manualLimiter(t, clocked, all[:n]...)
				if core.Direct(lim) == clocked {
					t.Fatalf("Direct = %v with clock %v", core.Direct(lim), clocked)
				}
				d1, err := lim.Allow(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				kept := slices.Clone(d1.States)
				d2, _ := lim.Allow(ctx, "k")
				p, _ := lim.Peek(ctx, "k")
				if !reflect.DeepEqual(d1.States, kept) {
					t.Fatalf("a later decision changed an earlier one's States:\n%+v\nwant\n%+v", d1.States, kept)
				}
				if len(d2.States) != n || len(p.States) != n || cap(d2.States) != n {
					t.Fatalf("States of %d, %d (capacity %d), want %d", len(d2.States), len(p.States), cap(d2.States), n)
				}
				for i := range n {
					if got, want := d2.States[i].Remaining, d1.States[i].Remaining-1; got != want {
						t.Errorf("limit %d: Remaining %d after %d, want %d", i, got, d1.States[i].Remaining, want)
					}
					if p.States[i] != d2.States[i] {
						t.Errorf("limit %d: Peek %+v, want the last Allow's %+v", i, p.States[i], d2.States[i])
					}
				}
				_ = append(d2.States, core.LimitState{Remaining: -1})
				if again, _ := lim.Peek(ctx, "k"); !reflect.DeepEqual(again.States, p.States) {
					t.Fatalf("an append to a Decision's States wrote into another's")
				}
				want := 1.0 // the States; the store's parts are pooled
				if n > 4 {
					want = 2 // the States, and the engine's scratch
				}
				if raceEnabled {
					return // the race detector's allocations
				}
				for name, fn := range map[string]func(){
					"Allow": func() { lim.Allow(ctx, "k") },
					"Peek":  func() { lim.Peek(ctx, "k") },
				} {
					if got := testing.AllocsPerRun(200, fn); got != want {
						t.Errorf("%s allocates %v times a call, want %v", name, got, want)
					}
				}
			})
		}
	}
}

// AllowNInto decides as AllowN does, field by field, with the States in
// the caller's memory when it has room for them: for plans of one limit
// (States nil) to nine, on a Limiter that goes straight to its store and
// on one with a clock of its own (which allocates as AllowN does), through
// allowed and denied decisions and an invalid cost; and with room, on up
// to four limits, without allocating.
func TestAllowNIntoDecidesAsAllowN(t *testing.T) {
	ctx := context.Background()
	algs := []core.Algorithm{core.SlidingWindow, core.GCRA, core.FixedWindow, core.TokenBucket}
	for n := 1; n <= 9; n++ {
		for _, clocked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d limits, clock %v", n, clocked), func(t *testing.T) {
				var limits []core.Option
				for i := range n {
					limits = append(limits, core.Per(int64(3+i), time.Duration(i+1)*time.Second).WithAlgorithm(algs[i%len(algs)]).Named(fmt.Sprint("l", i)))
				}
				into, c1 := manualLimiter(t, clocked, limits...)
				plain, c2 := manualLimiter(t, clocked, limits...)
				mem := make([]core.LimitState, 0, 9)
				var d core.Decision
				for step := range 12 {
					cost := int64(1 + step%2)
					if step == 5 {
						cost = -1
					}
					d.States = mem
					err1 := into.AllowNInto(ctx, "k", cost, &d)
					want, err2 := plain.AllowN(ctx, "k", cost)
					if (err1 == nil) != (err2 == nil) || !reflect.DeepEqual(d, want) {
						t.Fatalf("step %d: AllowNInto %+v, %v; AllowN %+v, %v", step, d, err1, want, err2)
					}
					if n == 1 && d.States != nil {
						t.Fatalf("step %d: States %v on one limit, want nil", step, d.States)
					}
					if n > 1 && err1 == nil && !clocked && &d.States[0] != &mem[:1][0] {
						t.Fatalf("step %d: the States are not in the caller's memory", step)
					}
					c1.Set(c1.Now().Add(150 * time.Millisecond))
					c2.Set(c2.Now().Add(150 * time.Millisecond))
				}
				if raceEnabled || clocked || n > 4 {
					return // the race detector's allocations; AllowN's; the engine's scratch beyond 4
				}
				if got := testing.AllocsPerRun(200, func() {
					d.States = mem
					into.AllowNInto(ctx, "other", 1, &d)
				}); got != 0 {
					t.Errorf("AllowNInto allocates %v times a call, want 0", got)
				}
			})
		}
	}
}

// A Receipt gives a refund each limit's ResetAfter right after the charge,
// in µs, in the plan's order: from the Decision's ResetAfter for one
// limit, from its States for several; -1 (unknown) for Never.
func TestAReceiptCarriesEveryLimitsReset(t *testing.T) {
	for n := 1; n <= 9; n++ {
		d := core.Decision{Allowed: true, Cost: 1, ResetAfter: 7 * time.Second}
		want := []int64{7_000_000}
		if n > 1 {
			want = nil
			for i := range n {
				reset := time.Duration(i+1) * time.Millisecond
				w := int64(i+1) * 1000
				if i == 2 {
					reset, w = core.Never, -1
				}
				d.States = append(d.States, core.LimitState{ResetAfter: reset})
				want = append(want, w)
			}
		}
		core.SetCharged(&d, 1_700_000_000_000_000)
		if got := core.ReceiptResets(d.Receipt()); !slices.Equal(got, want) {
			t.Errorf("%d limits: resets %v, want %v", n, got, want)
		}
	}
}

// tee is an InProcess store of a user's: it applies every op to a primary
// store and to a shadow, and returns the primary's Result. Core lends it
// no memory (engine.Op.Parts), which the shadow's apply would overwrite.
type tee struct{ primary, shadow *memstore.Store }

func (s tee) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	res, err := s.primary.Apply(ctx, op)
	s.shadow.Apply(ctx, op)
	return res, err
}
func (tee) InProcess()   {}
func (tee) Close() error { return nil }

// A store of a user's that is InProcess gets no memory lent for each
// limit's part of the Result: a wrapper that applies an op twice returns
// the Result it means, States and all, through Allow, AllowNInto and Peek.
func TestAnInProcessStoreOfAUsersGetsNoParts(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock(t0)
	s := tee{memstore.New(memstore.WithSweepInterval(0), memstore.WithClock(clock)), memstore.New(memstore.WithSweepInterval(0), memstore.WithClock(clock))}
	t.Cleanup(func() { s.primary.Close(); s.shadow.Close() })
	limits := []core.Option{core.PerMinute(10), core.PerHour(100)}
	shadowed, err := core.New(s.shadow, limits...)
	if err != nil {
		t.Fatal(err)
	}
	shadowed.AllowN(ctx, "k", 5) // the shadow's numbers differ from the primary's
	lim, err := core.New(s, limits...)
	if err != nil {
		t.Fatal(err)
	}
	check := func(call string, d core.Decision, err error, remaining int64) {
		t.Helper()
		if err != nil || len(d.States) != 2 || d.States[0].Remaining != remaining || d.Remaining != remaining {
			t.Errorf("%s: %+v, %v; want the primary's %d remaining, in Remaining and in States[0]", call, d, err, remaining)
		}
	}
	d, err := lim.Allow(ctx, "k")
	check("Allow", d, err, 9)
	d.States = make([]core.LimitState, 0, 4)
	err = lim.AllowNInto(ctx, "k", 1, &d)
	check("AllowNInto", d, err, 8)
	d, err = lim.Peek(ctx, "k")
	check("Peek", d, err, 8)
}
