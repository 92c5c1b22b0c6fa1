package core_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/memstore"
)

func TestParseLimitsAccepts(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		name string
		in   string
		want []core.Limit
	}{
		{"a list of rates with unit letters", "10/s, 120/m, 240/h",
			[]core.Limit{core.PerSecond(10), core.PerMinute(120), core.PerHour(240)}},
		{"days and weeks", "5000/d, 20000/w", []core.Limit{core.PerDay(5000), core.Per(20000, 7*day)}},
		{"an algorithm, a burst and a name", "100/m gcra burst 20 name api",
			[]core.Limit{core.PerMinute(100).WithAlgorithm(core.GCRA).WithBurst(20).Named("api")}},
		{"a quota unit", "10000/m unit tokens name llm",
			[]core.Limit{core.PerMinute(10000).WithUnit("tokens").Named("llm")}},
		{"options in any order, with '='", "100/m name=api burst=20 algorithm=gcra",
			[]core.Limit{core.PerMinute(100).WithAlgorithm(core.GCRA).WithBurst(20).Named("api")}},
		{"a number of units", "5/2h", []core.Limit{core.Per(5, 2*time.Hour)}},
		{"seconds past a minute", "3/90s", []core.Limit{core.Per(3, 90*time.Second)}},
		{"a decimal period", "10/1.5s", []core.Limit{core.Per(10, 1500*time.Millisecond)}},
		{"a compound period", "1/1h30m", []core.Limit{core.Per(1, 90*time.Minute)}},
		{"a compound period in words", "1 per 1 hour 30 minutes", []core.Limit{core.Per(1, 90*time.Minute)}},
		{"milliseconds and microseconds", "1/250ms, 1/500us, 1/500µs, 2/1500μs",
			[]core.Limit{core.Per(1, 250*time.Millisecond), core.Per(1, 500*time.Microsecond), core.Per(1, 500*time.Microsecond), core.Per(2, 1500*time.Microsecond)}},
		{"Python limits' format", "10 per second; 100/minute; 1000 per 2 hours",
			[]core.Limit{core.PerSecond(10), core.PerMinute(100), core.Per(1000, 2*time.Hour)}},
		{"Python limits' pipe separator", "1/second|5 per day", []core.Limit{core.PerSecond(1), core.PerDay(5)}},
		{"ulule/limiter's format", "10-S, 500-M, 1000-H, 2000-D",
			[]core.Limit{core.PerSecond(10), core.PerMinute(500), core.PerHour(1000), core.PerDay(2000)}},
		{"the default policy name", "100-per-1m, 3-per-90s", []core.Limit{core.PerMinute(100), core.Per(3, 90*time.Second)}},
		{"units in any case", "1/SEC, 2/Minutes, 3/HR", []core.Limit{core.PerSecond(1), core.PerMinute(2), core.PerHour(3)}},
		{"algorithms in other spellings", "1/s TokenBucket, 1/s leaky_bucket, 1/s SLIDING-LOG, 1/s fixedwindow",
			[]core.Limit{core.PerSecond(1).WithAlgorithm(core.TokenBucket), core.PerSecond(1).WithAlgorithm(core.LeakyBucket),
				core.PerSecond(1).WithAlgorithm(core.SlidingLog), core.PerSecond(1).WithAlgorithm(core.FixedWindow)}},
		{"the default algorithm named", "1/s sliding-window", []core.Limit{core.PerSecond(1)}},
		{"a bucketed window with its precision", "60/m bucketed-window precision 10s",
			[]core.Limit{core.PerMinute(60).WithAlgorithm(core.BucketedWindow).WithPrecision(10 * time.Second)}},
		{"a quoted name holding separators", `5/s name "search, hourly | all"`, []core.Limit{core.PerSecond(5).Named("search, hourly | all")}},
		{"a quota with digit groups", "1_000_000/d", []core.Limit{core.PerDay(1_000_000)}},
		{"spaces, tabs and newlines around everything", " \t10 / s ,\n 20/m\n", []core.Limit{core.PerSecond(10), core.PerMinute(20)}},
		{"the largest quota and period", "140737488355328/9600h fixed-window", []core.Limit{core.Per(core.MaxQuota, core.MaxPeriod).WithAlgorithm(core.FixedWindow)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := core.ParseLimits(tt.in)
			if err != nil {
				t.Fatalf("ParseLimits(%q) = %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseLimits(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseLimitsRejects(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		index  int    // the item
		offset int    // the byte offset of the problem
		msg    string // the error says this
	}{
		{"an empty string", "", 0, 0, "no limits"},
		{"an empty item", "10/s,,20/m", 1, 5, "empty item"},
		{"a trailing separator", "10/s, ", 1, 6, "empty item"},
		{"a missing quota", "/s", 0, 0, `want a quota, a whole number, at the start, not "/s"`},
		{"a zero quota in the second item", "10/s, 0/m", 1, 6, "quota 0 must be at least 1"},
		{"a negative quota", "-5/s", 0, 0, "want a quota"},
		{"a decimal quota", "1.5/s", 0, 0, `quota "1.5/s" is not a whole number`},
		{"a quota above MaxQuota", "140737488355329/s", 0, 0, "quota 140737488355329 exceeds 140737488355328"},
		{"a quota of many digits", "99999999999999999999999/s", 0, 0, "exceeds 140737488355328"},
		{"a missing separator", "10 s", 0, 3, `want "/", "per" or "-" after the quota, not "s"`},
		{"a missing period", "10/", 0, 3, "want a period"},
		{"a zero period", "10/0s", 0, 3, "period 0s must be positive"},
		{"a number without a unit", "10/5", 0, 4, "want a unit after 5"},
		{"an unknown unit", "10/fortnight", 0, 3, `unknown unit "fortnight"`},
		{"a month", "10/month", 0, 3, `unit "month" has no fixed length`},
		{"a year", "10 per year", 0, 7, `unit "year" has no fixed length`},
		{"a period beyond MaxPeriod", "10/401d", 0, 3, "period 401d exceeds 9600h0m0s"},
		{"a compound period beyond MaxPeriod", "10/400d 1h", 0, 8, "exceeds 9600h0m0s"},
		{"a period of too many digits", "10/99999999999999999999999999s", 0, 3, "exceeds"},
		{"a fraction of a nanosecond", "10/1.0000000001s", 0, 3, "not a whole number of nanoseconds"},
		{"a period that is not whole microseconds", "10/1500ns", 0, 0, "not a whole number of microseconds"},
		{"an unknown option", "10/s fast", 0, 5, `unknown option "fast"`},
		{"an unknown algorithm after algorithm=", "10/s algorithm=quick", 0, 15, `unknown option "quick"`},
		{"two algorithms", "10/s gcra token-bucket", 0, 10, "algorithm given twice"},
		{"two bursts", "10/s gcra burst 2 burst 3", 0, 18, "burst given twice"},
		{"a burst without a value", "10/s gcra burst", 0, 10, "burst needs a value"},
		{"a burst that is not a number", "10/s gcra burst many", 0, 16, `burst needs a whole number, not "many"`},
		{"a zero burst", "10/s gcra burst 0", 0, 16, "burst 0 must be at least 1"},
		{"a burst on a sliding window", "100/m burst 20", 0, 6, "burst applies to token-bucket, gcra and leaky-bucket, not sliding-window"},
		{"a precision on a fixed window", "100/m fixed-window precision 10s", 0, 19, "precision applies to bucketed-window, not fixed-window"},
		{"a precision that does not divide the period", "100/m bucketed-window precision 7s", 0, 0, "precision 7s does not divide period 1m0s"},
		{"a name without a space before the next option", `10/s name "a"gcra`, 0, 13, `want a space before "gcra"`},
		{"an unterminated quoted name", `10/s name "a, 20/m`, 0, 10, "unterminated quoted name"},
		{"a name that is not printable ASCII", "10/s name café", 0, 0, "is not printable ASCII"},
		{"a name that is too long", "10/s name " + strings.Repeat("n", core.MaxNameLen+1), 0, 0, "129 bytes long"},
		{"a burst that drains too slowly", "1/400d gcra burst 140737488355328", 0, 0, "a full debt would take longer than"},
		{"a sliding log of too large a quota", "100000/s sliding-log", 0, 0, "sliding-log quota 100000 exceeds 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := core.ParseLimits(tt.in)
			if err == nil {
				t.Fatalf("ParseLimits(%q) = %v, want an error", tt.in, got)
			}
			if !errors.Is(err, core.ErrInvalidLimit) {
				t.Errorf("ParseLimits(%q) = %v, want an error wrapping ErrInvalidLimit", tt.in, err)
			}
			var pe *core.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseLimits(%q) = %v (%T), want a *ParseError", tt.in, err, err)
			}
			if pe.Index != tt.index {
				t.Errorf("ParseLimits(%q): Index = %d, want %d", tt.in, pe.Index, tt.index)
			}
			if pe.Offset != tt.offset {
				t.Errorf("ParseLimits(%q): Offset = %d, want %d (%v)", tt.in, pe.Offset, tt.offset, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("ParseLimits(%q) = %q, want it to say %q", tt.in, err, tt.msg)
			}
			if want := fmt.Sprintf("item %d %q", pe.Index, pe.Item); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("ParseLimits(%q) = %q, want it to start with %s", tt.in, err, want)
			}
		})
	}
}

// TestParseErrorPointsAtTheItem checks Item and Offset against the input:
// the item's text stands in the input, the offset inside or at its end.
func TestParseErrorPointsAtTheItem(t *testing.T) {
	in := "10/s, 20/m gcra burst x, 30/h"
	_, err := core.ParseLimits(in)
	var pe *core.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("ParseLimits(%q) = %v, want a *ParseError", in, err)
	}
	if pe.Index != 1 || pe.Item != "20/m gcra burst x" {
		t.Errorf("ParseLimits(%q): item %d %q, want item 1 %q", in, pe.Index, pe.Item, "20/m gcra burst x")
	}
	if got := in[pe.Offset:]; !strings.HasPrefix(got, "x,") {
		t.Errorf("ParseLimits(%q): Offset %d points at %q, want the burst's value", in, pe.Offset, got)
	}
}

func TestFormatLimits(t *testing.T) {
	tests := []struct {
		name   string
		limits []core.Limit
		want   string
	}{
		{"no limits", nil, ""},
		{"one unit of each length", []core.Limit{core.PerSecond(1), core.PerMinute(2), core.PerHour(3), core.PerDay(4)}, "1/s, 2/m, 3/h, 4/d"},
		{"periods of several units", []core.Limit{core.Per(5, 2*time.Hour), core.Per(3, 90*time.Second), core.Per(1, 1500*time.Millisecond), core.Per(1, time.Millisecond), core.Per(1, 250*time.Microsecond)},
			"5/2h, 3/90s, 1/1500ms, 1/1ms, 1/250us"},
		{"every option", []core.Limit{core.PerMinute(100).WithAlgorithm(core.GCRA).WithBurst(20).Named("api").WithUnit("tokens")}, "100/m gcra burst 20 name api unit tokens"},
		{"a precision", []core.Limit{core.PerMinute(60).WithAlgorithm(core.BucketedWindow).WithPrecision(time.Second)}, "60/m bucketed-window precision 1s"},
		{"a name that needs quotes", []core.Limit{core.PerSecond(1).Named(`a "b", c`)}, `1/s name "a \"b\", c"`},
		{"a zero limit, which ParseLimits rejects", []core.Limit{{}}, "0/0ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := core.FormatLimits(tt.limits...); got != tt.want {
				t.Errorf("FormatLimits(%v) = %q, want %q", tt.limits, got, tt.want)
			}
		})
	}
}

func TestMustParseLimitsPanicsOnAnError(t *testing.T) {
	defer func() {
		err, _ := recover().(error)
		if !errors.Is(err, core.ErrInvalidLimit) {
			t.Errorf("MustParseLimits(\"0/s\") panicked with %v, want an error wrapping ErrInvalidLimit", err)
		}
	}()
	core.MustParseLimits("0/s")
}

func TestWithLimitsAddsEachLimit(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	lim, err := core.New(store, core.WithLimits(core.MustParseLimits("2/m, 3/h")...))
	if err != nil {
		t.Fatal(err)
	}
	got := lim.Limits(context.Background(), "k")
	if len(got) != 2 || got[0].Quota != 2 || got[1].Quota != 3 {
		t.Errorf("Limits = %v, want 2/m and 3/h", got)
	}
	if _, err := core.New(store, core.WithLimits(core.PerSecond(0))); !errors.Is(err, core.ErrInvalidLimit) {
		t.Errorf("New(WithLimits(PerSecond(0))) = %v, want ErrInvalidLimit", err)
	}
}

// FuzzParseLimits checks that ParseLimits never panics, that its errors
// are *ParseErrors wrapping ErrInvalidLimit with an offset inside the
// input, and that what it accepts is valid and round-trips through
// FormatLimits.
func FuzzParseLimits(f *testing.F) {
	for _, s := range []string{
		"10/s, 120/m, 240/h", "100/m gcra burst 20 name api unit tokens", "5/2h", "3/90s", "10/1.5s", "1/1h30m",
		"60/m bucketed-window precision 10s", "10 per second; 100/minute", "10-S, 1000-H", "100-per-1m",
		`5/s name "a, \"b\"" token-bucket`, "1_000/d leaky_bucket burst=3", "1/250µs", "10/month", "0/s", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		limits, err := core.ParseLimits(s)
		if err != nil {
			var pe *core.ParseError
			if !errors.As(err, &pe) || !errors.Is(err, core.ErrInvalidLimit) {
				t.Fatalf("ParseLimits(%q) = %v (%T), want a *ParseError wrapping ErrInvalidLimit", s, err, err)
			}
			if pe.Offset < 0 || pe.Offset > len(s) || !strings.Contains(s, pe.Item) {
				t.Fatalf("ParseLimits(%q) = %v: offset %d or item %q not in the input", s, err, pe.Offset, pe.Item)
			}
			return
		}
		if len(limits) == 0 {
			t.Fatalf("ParseLimits(%q) = no limits and no error", s)
		}
		for _, l := range limits {
			if err := l.Validate(); err != nil {
				t.Fatalf("ParseLimits(%q) returned %v, which Validate rejects: %v", s, l, err)
			}
		}
		text := core.FormatLimits(limits...)
		again, err := core.ParseLimits(text)
		if err != nil {
			t.Fatalf("ParseLimits(%q) = %v, formatted %q, which ParseLimits rejects: %v", s, limits, text, err)
		}
		if !reflect.DeepEqual(again, limits) {
			t.Fatalf("ParseLimits(%q) = %#v, formatted %q, parsed back as %#v", s, limits, text, again)
		}
	})
}

// An Algorithm reads and writes itself by name, as configuration formats
// decode it, in the spellings ParseLimits accepts.
func TestAlgorithmText(t *testing.T) {
	for _, a := range core.Algorithms() {
		text, err := a.MarshalText()
		if err != nil || string(text) != a.String() {
			t.Errorf("%v.MarshalText() = %q, %v, want %q", a, text, err, a.String())
		}
		for _, spelling := range []string{a.String(), strings.ToUpper(a.String()), strings.ReplaceAll(a.String(), "-", "_"), strings.ReplaceAll(a.String(), "-", "")} {
			got := core.Algorithm(255)
			if err := got.UnmarshalText([]byte(spelling)); err != nil || got != a {
				t.Errorf("UnmarshalText(%q) = %v, %v, want %v", spelling, got, err, a)
			}
		}
	}
	for _, bad := range []string{"", "quick", "gcra2", "-"} {
		a := core.GCRA
		if err := a.UnmarshalText([]byte(bad)); !errors.Is(err, core.ErrInvalidLimit) || a != core.GCRA {
			t.Errorf("UnmarshalText(%q) = %v, %v, want an error wrapping ErrInvalidLimit and GCRA kept", bad, a, err)
		}
	}
	if _, err := core.Algorithm(200).MarshalText(); !errors.Is(err, core.ErrInvalidLimit) {
		t.Errorf("Algorithm(200).MarshalText() error = %v, want ErrInvalidLimit", err)
	}
}
