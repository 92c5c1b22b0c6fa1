package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
)

func TestLimitValidateRejects(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	bucketed := func(p, prec time.Duration) core.Limit {
		return core.Per(10, p).WithAlgorithm(core.BucketedWindow).WithPrecision(prec)
	}
	tests := []struct {
		name  string
		limit core.Limit
		msg   string // the error says this
	}{
		{"a zero quota", core.PerSecond(0), "quota 0 must be at least 1"},
		{"a negative quota", core.PerMinute(-5), "quota -5 must be at least 1"},
		{"a quota above MaxQuota", core.PerSecond(core.MaxQuota + 1), "quota 140737488355329 exceeds 140737488355328"},
		{"a zero period", core.Per(1, 0), "period 0s must be at least 1µs"},
		{"a negative period", core.Per(1, -time.Second), "period -1s must be at least 1µs"},
		{"a sub-microsecond period", core.Per(1, 999*time.Nanosecond), "period 999ns must be at least 1µs"},
		{"a period that is not a whole number of microseconds", core.Per(1, 1500*time.Nanosecond), "period 1.5µs is not a whole number of microseconds"},
		{"a period of a second and a nanosecond", core.Per(1, time.Second+1), "not a whole number of microseconds"},
		{"a period above MaxPeriod", core.Per(1, core.MaxPeriod+us), "period 9600h0m0.000001s exceeds 9600h0m0s"},
		{"a negative burst", core.PerSecond(1).WithBurst(-1), "burst -1 must be at least 1"},
		{"a burst above MaxQuota", core.PerSecond(1).WithBurst(core.MaxQuota + 1), "burst 140737488355329 exceeds"},
		// Ignored, they would leave the limit other than it reads.
		{"a burst on the default sliding window", core.PerSecond(10).WithBurst(5), "burst applies to token-bucket, gcra and leaky-bucket, not sliding-window"},
		{"a burst on a fixed window", core.PerSecond(10).WithBurst(5).WithAlgorithm(core.FixedWindow), "not fixed-window"},
		{"a burst on a sliding log", core.PerSecond(10).WithBurst(5).WithAlgorithm(core.SlidingLog), "not sliding-log"},
		{"a burst on a bucketed window", core.PerSecond(10).WithBurst(5).WithAlgorithm(core.BucketedWindow), "not bucketed-window"},
		{"a precision on the default sliding window", core.PerSecond(5).WithPrecision(100 * ms), "precision applies to bucketed-window, not sliding-window"},
		{"a precision on GCRA", core.PerSecond(5).WithPrecision(100 * ms).WithAlgorithm(core.GCRA), "not gcra"},
		{"an unknown algorithm", core.PerSecond(1).WithAlgorithm(core.Algorithm(8)), "unknown algorithm 8"},
		{"the largest unknown algorithm", core.PerSecond(1).WithAlgorithm(core.Algorithm(255)), "unknown algorithm 255"},
		{"a precision that does not divide the period", bucketed(time.Second, 300*ms), "precision 300ms does not divide period 1s"},
		{"a negative precision", bucketed(time.Second, -100*ms), "precision -100ms is negative"},
		{"a precision longer than the period", bucketed(time.Second, 2*time.Second), "precision 2s does not divide period 1s"},
		{"a precision that is not a whole number of microseconds", bucketed(3*us, 1500*time.Nanosecond), "does not divide period 3µs into whole microsecond buckets"},
		{"more than MaxBuckets buckets", bucketed(time.Second, 100*us), "period 1s / precision 100µs is more than 1024 buckets"},
		{"1025 buckets", bucketed(1025*ms, ms), "more than 1024 buckets"},
		{"a period without a whole-µs tenth and no precision", core.Per(10, 15*us).WithAlgorithm(core.BucketedWindow), "period 15µs has no default precision; set Precision"},
		{"a 1µs period and no precision", core.Per(10, us).WithAlgorithm(core.BucketedWindow), "has no default precision"},
		{"a sliding-log quota above MaxLogQuota", core.PerHour(core.MaxLogQuota + 1).WithAlgorithm(core.SlidingLog), "sliding-log quota 65537 exceeds 65536; use sliding-window or bucketed-window"},
		{"a name with a newline", core.PerSecond(1).Named("bad\nname"), `name "bad\nname" is not printable ASCII`},
		{"a name with a tab", core.PerSecond(1).Named("a\tb"), "is not printable ASCII"},
		{"a name with DEL", core.PerSecond(1).Named("a\x7f"), "is not printable ASCII"},
		{"a name with a NUL", core.PerSecond(1).Named("\x00"), "is not printable ASCII"},
		{"a name that is not ASCII", core.PerSecond(1).Named("per-minute-é"), "is not printable ASCII"},
		{"a name of invalid UTF-8", core.PerSecond(1).Named("\xff"), "is not printable ASCII"},
		{"a name longer than MaxNameLen", core.PerSecond(1).Named(strings.Repeat("n", core.MaxNameLen+1)), "name is 129 bytes long, more than 128"},
		{"a unit with a space", core.PerSecond(1).WithUnit("content bytes"), `unit "content bytes" is not an sf-token`},
		{"a unit starting with a digit", core.PerSecond(1).WithUnit("1k-bytes"), "is not an sf-token"},
		{"a unit with a quote", core.PerSecond(1).WithUnit(`to"kens`), "is not an sf-token"},
		{"a unit that is not ASCII", core.PerSecond(1).WithUnit("octets-é"), "is not an sf-token"},
		{"a unit longer than MaxUnitLen", core.PerSecond(1).WithUnit(strings.Repeat("u", core.MaxUnitLen+1)), "unit is 65 bytes long, more than 64"},
		// A full debt, DebtFactor × burst, would drain in more than 2^51µs.
		{"a burst that drains too slowly", core.Per(1, 2*time.Second).WithBurst(core.MaxQuota).WithAlgorithm(core.TokenBucket), "burst 140737488355328 drains at 1 per 2s: a full debt would take longer than"},
		{"a burst of a day's quota that drains too slowly", core.PerDay(1).WithBurst(core.MaxQuota / 1000).WithAlgorithm(core.GCRA), "a full debt would take longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is invalid", func(t *testing.T) {
			err := tt.limit.Validate()
			if !errors.Is(err, core.ErrInvalidLimit) {
				t.Fatalf("%+v.Validate() = %v, want an error wrapping ErrInvalidLimit", tt.limit, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("%+v.Validate() = %q, want it to say %q", tt.limit, err, tt.msg)
			}
		})
	}
}

// The error names the limit: by Name when it is valid, else by its numbers.
func TestLimitValidateErrorNamesTheLimit(t *testing.T) {
	err := core.PerSecond(0).Named("api").Validate()
	if want := `tollgate: invalid limit "api": quota 0 must be at least 1`; err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
	err = core.PerSecond(0).Validate()
	if want := "tollgate: invalid limit {Quota: 0, Period: 1s}: quota 0 must be at least 1"; err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
	err = core.PerSecond(1).Named("x\ny").Validate()
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("Validate() = %q, want an error without the raw newline", err)
	}
}

func TestLimitValidateAccepts(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	tests := []struct {
		name  string
		limit core.Limit
	}{
		{"a quota of 1 per 1µs", core.Per(1, us)},
		{"a quota of 1 per MaxPeriod", core.Per(1, core.MaxPeriod)},
		// Wide limits, Capacity × Period past 2^47µs: exact all the same.
		{"MaxQuota per second on a sliding window", core.PerSecond(core.MaxQuota)},
		{"MaxQuota per 2s on a sliding window", core.Per(core.MaxQuota, 2*time.Second)},
		{"MaxQuota per MaxPeriod on a sliding window", core.Per(core.MaxQuota, core.MaxPeriod)},
		{"MaxQuota per MaxPeriod on GCRA", core.Per(core.MaxQuota, core.MaxPeriod).WithAlgorithm(core.GCRA)},
		{"a quota of 1e13 per 1.5s, no whole number of seconds", core.Per(10_000_000_000_000, 1500*ms)},
		{"a leaky bucket of 2^47/10000 per day", core.PerDay(core.MaxQuota / 10_000).WithAlgorithm(core.LeakyBucket)},
		{"MaxQuota per day on a fixed window", core.PerDay(core.MaxQuota).WithAlgorithm(core.FixedWindow)},
		{"MaxQuota per MaxPeriod on a bucketed window", core.Per(core.MaxQuota, core.MaxPeriod).WithAlgorithm(core.BucketedWindow)},
		{"MaxLogQuota on a sliding log", core.PerHour(core.MaxLogQuota).WithAlgorithm(core.SlidingLog)},
		{"a burst of MaxQuota refilled at 2^40 per second on a token bucket", core.PerSecond(1 << 40).WithBurst(core.MaxQuota).WithAlgorithm(core.TokenBucket)},
		{"a burst of 0, the default", core.PerSecond(5).WithBurst(0).WithAlgorithm(core.GCRA)},
		{"a burst below the quota", core.PerSecond(5).WithBurst(1).WithAlgorithm(core.TokenBucket)},
		{"a precision equal to the period", core.PerSecond(5).WithAlgorithm(core.BucketedWindow).WithPrecision(time.Second)},
		{"exactly MaxBuckets buckets", core.Per(5, 1024*ms).WithAlgorithm(core.BucketedWindow).WithPrecision(ms)},
		{"a default precision of a tenth of 10µs", core.Per(5, 10*us).WithAlgorithm(core.BucketedWindow)},
		{"a name of MaxNameLen printable bytes", core.PerSecond(1).Named(strings.Repeat("~", core.MaxNameLen))},
		{"a name with every printable ASCII character", core.PerSecond(1).Named(printableASCII()[:core.MaxNameLen-33])},
		{"a name with quotes and backslashes", core.PerSecond(1).Named(`per "minute" \ plan`)},
		{"an odd period", core.Per(3, 1234567*us)},
		{"a registered unit", core.PerSecond(1).WithUnit("content-bytes")},
		{"a unit of one's own", core.PerSecond(1).WithUnit("tokens")},
		{"a unit with every other character an sf-token allows", core.PerSecond(1).WithUnit("*A9!#$%&'*+-.^_`|~:/")},
		{"a unit of MaxUnitLen bytes", core.PerSecond(1).WithUnit(strings.Repeat("u", core.MaxUnitLen))},
	}
	for _, alg := range []core.Algorithm{core.SlidingWindow, core.TokenBucket, core.GCRA, core.LeakyBucket, core.FixedWindow, core.BucketedWindow} {
		// A tick of 1ms and of 1s.
		tests = append(tests,
			struct {
				name  string
				limit core.Limit
			}{"a million a day on " + alg.String(), core.PerDay(1_000_000).WithAlgorithm(alg)},
			struct {
				name  string
				limit core.Limit
			}{"a billion a day on " + alg.String(), core.PerDay(1_000_000_000).WithAlgorithm(alg)},
			struct {
				name  string
				limit core.Limit
			}{"a million per 400 days on " + alg.String(), core.Per(1_000_000, core.MaxPeriod).WithAlgorithm(alg)},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name+" is valid", func(t *testing.T) {
			if err := tt.limit.Validate(); err != nil {
				t.Errorf("%+v.Validate() = %v, want nil", tt.limit, err)
			}
		})
	}
}

func printableASCII() string {
	var b strings.Builder
	for c := byte(0x20); c <= 0x7e; c++ {
		b.WriteByte(c)
	}
	return b.String()
}

func TestLimitConstructors(t *testing.T) {
	tests := []struct {
		name string
		got  core.Limit
		want core.Limit
	}{
		{"PerSecond", core.PerSecond(10), core.Limit{Quota: 10, Period: time.Second}},
		{"PerMinute", core.PerMinute(100), core.Limit{Quota: 100, Period: time.Minute}},
		{"PerHour", core.PerHour(5), core.Limit{Quota: 5, Period: time.Hour}},
		{"PerDay", core.PerDay(1), core.Limit{Quota: 1, Period: 24 * time.Hour}},
		{"Per", core.Per(3, 90*time.Second), core.Limit{Quota: 3, Period: 90 * time.Second}},
		{"Every", core.Every(250 * time.Millisecond), core.Limit{Quota: 1, Period: 250 * time.Millisecond}},
		{"WithBurst", core.PerSecond(1).WithBurst(5), core.Limit{Quota: 1, Period: time.Second, Burst: 5}},
		{"WithAlgorithm", core.PerSecond(1).WithAlgorithm(core.GCRA), core.Limit{Quota: 1, Period: time.Second, Algorithm: core.GCRA}},
		{"WithPrecision", core.PerSecond(1).WithPrecision(time.Millisecond), core.Limit{Quota: 1, Period: time.Second, Precision: time.Millisecond}},
		{"Named", core.PerSecond(1).Named("api"), core.Limit{Name: "api", Quota: 1, Period: time.Second}},
		{
			"all of them together",
			core.PerMinute(60).WithBurst(10).WithAlgorithm(core.TokenBucket).WithPrecision(time.Second).Named("p"),
			core.Limit{Name: "p", Quota: 60, Period: time.Minute, Burst: 10, Precision: time.Second, Algorithm: core.TokenBucket},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name+" builds the limit", func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("%s = %+v, want %+v", tt.name, tt.got, tt.want)
			}
		})
	}
	t.Run("the With methods return copies", func(t *testing.T) {
		base := core.PerSecond(1)
		_ = base.WithBurst(5).WithAlgorithm(core.GCRA).Named("x")
		if base != core.PerSecond(1) {
			t.Errorf("base changed to %+v", base)
		}
	})
	t.Run("the zero algorithm is the sliding window", func(t *testing.T) {
		if a := core.PerSecond(1).Algorithm; a != core.SlidingWindow {
			t.Errorf("PerSecond(1).Algorithm = %v, want sliding-window", a)
		}
	})
}

// HasBurst says which algorithms Validate lets take a Burst.
func TestHasBurstIsWhereValidateTakesABurst(t *testing.T) {
	for _, alg := range core.Algorithms() {
		err := core.PerSecond(10).WithBurst(5).WithAlgorithm(alg).Validate()
		if alg.HasBurst() != (err == nil) {
			t.Errorf("%v: HasBurst %v, but Validate of a burst = %v", alg, alg.HasBurst(), err)
		}
	}
}

func TestLimitCapacity(t *testing.T) {
	tests := []struct {
		limit core.Limit
		want  int64
	}{
		{core.PerSecond(10), 10},
		{core.PerSecond(10).WithBurst(3).WithAlgorithm(core.TokenBucket), 3},
		{core.PerSecond(10).WithBurst(30).WithAlgorithm(core.GCRA), 30},
		{core.PerSecond(10).WithBurst(1).WithAlgorithm(core.LeakyBucket), 1},
		{core.PerSecond(10).WithAlgorithm(core.TokenBucket), 10}, // Burst 0: Quota
	}
	for _, tt := range tests {
		if got := tt.limit.Capacity(); got != tt.want {
			t.Errorf("%+v.Capacity() = %d, want %d", tt.limit, got, tt.want)
		}
	}
}

func TestLimitPolicyName(t *testing.T) {
	tests := []struct {
		limit core.Limit
		want  string
	}{
		{core.PerMinute(100), "100-per-1m"},
		{core.PerSecond(10), "10-per-1s"},
		{core.PerHour(5), "5-per-1h"},
		{core.Per(3, 90*time.Second), "3-per-90s"},
		{core.PerDay(1), "1-per-1d"},
		{core.PerDay(5000), "5000-per-1d"},
		{core.Per(7, 250*time.Millisecond), "7-per-250ms"},
		{core.Per(2, 48*time.Hour), "2-per-2d"},
		{core.Per(2, 90*time.Minute), "2-per-90m"},
		{core.Per(2, 1500*time.Microsecond), "2-per-1500us"},
		{core.Every(time.Minute), "1-per-1m"},
		{core.PerMinute(100).WithAlgorithm(core.GCRA), "100-per-1m"},
		{core.PerMinute(100).Named("search"), "search"},
		{core.InFlight(8, time.Minute), "8-in-flight"},
		{core.PerMinute(10_000).WithUnit("tokens"), "10000-tokens-per-1m"},
		{core.PerMinute(10_000).WithUnit("tokens").Named("llm"), "llm"},
	}
	for _, tt := range tests {
		if got := tt.limit.PolicyName(); got != tt.want {
			t.Errorf("%+v.PolicyName() = %q, want %q", tt.limit, got, tt.want)
		}
	}
	if got, want := core.PerMinute(100).WithAlgorithm(core.TokenBucket).String(), "100-per-1m (token-bucket)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestAlgorithmString(t *testing.T) {
	want := []string{"sliding-window", "fixed-window", "sliding-log", "bucketed-window", "token-bucket", "gcra", "leaky-bucket", "concurrency"}
	algs := core.Algorithms()
	if len(algs) != len(want) {
		t.Fatalf("Algorithms() = %v, want %d algorithms", algs, len(want))
	}
	for i, a := range algs {
		if a != core.Algorithm(i) || a.String() != want[i] {
			t.Errorf("Algorithms()[%d] = %d %q, want %d %q", i, a, a, i, want[i])
		}
	}
	if got := core.Algorithm(8).String(); got != "Algorithm(8)" {
		t.Errorf("Algorithm(8).String() = %q, want \"Algorithm(8)\"", got)
	}
	if core.SlidingWindow != 0 {
		t.Errorf("SlidingWindow = %d, want the zero value", core.SlidingWindow)
	}
}

// A rated limit whose largest debt would drain for centuries cannot be
// computed exactly (nor its waits fit a Duration): Validate rejects it.
func TestValidateRejectsRatedLimitsThatDrainForCenturies(t *testing.T) {
	bad := core.Limit{Quota: 1, Period: time.Second, Burst: core.MaxQuota, Algorithm: core.GCRA}
	if err := bad.Validate(); !errors.Is(err, core.ErrInvalidLimit) {
		t.Errorf("Validate(%v burst %d) = %v, want ErrInvalidLimit", bad, bad.Burst, err)
	}
	ok := core.PerSecond(1).WithBurst(1_000_000).WithAlgorithm(core.TokenBucket) // drains 64e6 s ≈ 2 years
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(%v burst %d) = %v, want nil", ok, ok.Burst, err)
	}
}
