package core

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// ParseLimits parses a list of limits written for people: flags,
// environment variables, configuration files. For example
//
//	10/s, 120/m, 240/h                  three sliding-window limits
//	100/m gcra burst 20 name api        one GCRA limit, with a burst and a name
//	5/2h  3/90s  10/1.5s  1/1h30m       periods with numbers, decimals, compounds
//	60/m bucketed-window precision 10s  a bucketed window of 6 buckets
//	10 per second; 100/minute           the format of Python's limits package
//	10-S, 1000-H                        the format of ulule/limiter (S, M, H, D)
//	100-per-1m                          the default policy name (Limit.PolicyName)
//
// Items are separated by commas, semicolons or '|'. Each item is a rate,
// then options, separated by spaces:
//
//	item     = rate *(space option)
//	rate     = quota "/" period | quota " per " period | quota "-" period
//	         | quota "-per-" period
//	quota    = a whole number, at least 1 ("1_000" is 1000)
//	period   = unit | 1*(number unit)    s  90s  1.5h  1h30m  2 hours
//	unit     = ns | us | µs | ms | s | m | h | d | w, or the names sec,
//	           second, min, minute, hr, hour, day, week and their plurals;
//	           case-insensitive, so M is a minute (a month has no fixed
//	           length: write 30d)
//	option   = algorithm | "burst" N | "precision" period | "name" NAME
//	         | "unit" UNIT
//	algorithm= sliding-window (the default) | fixed-window | sliding-log
//	         | bucketed-window | token-bucket | gcra | leaky-bucket
//	         | concurrency (quota units in flight; period is the lease)
//	           (case, '-' and '_' do not matter: TokenBucket, token_bucket)
//
// An option's value follows it after a space or '=': "burst 20" or
// "burst=20". burst sets Limit.Burst and applies to token-bucket, gcra and
// leaky-bucket only; precision sets Limit.Precision and applies to
// bucketed-window only; name sets Limit.Name, quoted as a Go string when it
// holds spaces or separators ("name \"search, hourly\""). Without a name,
// Name is left empty (a Limiter derives one, see PolicyName); unit sets
// Limit.Unit, the quota unit ("10000/m unit tokens").
//
// Every limit is then checked with Validate. An error is a *ParseError
// that gives the item's index (from 0), its text and the byte offset in s
// of what is wrong; it wraps ErrInvalidLimit. An empty list is an error.
// FormatLimits writes limits back in this grammar.
func ParseLimits(s string) ([]Limit, error) {
	spans, err := splitLimits(s)
	if err != nil {
		return nil, err
	}
	limits := make([]Limit, 0, len(spans))
	for i, sp := range spans {
		p := limitParser{s: s, pos: sp[0], end: sp[1], index: i}
		p.trim()
		if p.pos == p.end {
			what := "empty item"
			if len(spans) == 1 {
				what = "no limits"
			}
			return nil, p.fail(p.pos, "%s", what)
		}
		l, err := p.limit()
		if err != nil {
			return nil, err
		}
		if err := l.Validate(); err != nil {
			return nil, &ParseError{Index: i, Item: p.item, Offset: p.start, Err: err}
		}
		limits = append(limits, l)
	}
	return limits, nil
}

// MustParseLimits is ParseLimits for literals known to be valid: it panics
// on an error, which for a literal is a programmer error.
//
//	lim, err := core.New(store, core.WithLimits(core.MustParseLimits("10/s, 100/m")...))
func MustParseLimits(s string) []Limit {
	limits, err := ParseLimits(s)
	if err != nil {
		panic(err)
	}
	return limits
}

// WithLimits adds limits to a Limiter, as passing each of them to New
// does: an Option for the limits ParseLimits returns. Their names, given
// or derived, must differ from each other's and from the Limiter's other
// limits' (New says which two do not). Default: none.
func WithLimits(limits ...Limit) Option {
	limits = append([]Limit(nil), limits...)
	return optionFunc(func(l *Limiter) error {
		for _, lim := range limits {
			if err := lim.applyLimiter(l); err != nil {
				return err
			}
		}
		return nil
	})
}

// A ParseError reports the item of a ParseLimits list that is invalid.
type ParseError struct {
	Index  int    // the item's index in the list, from 0
	Item   string // the item's text, without surrounding spaces
	Offset int    // byte offset, in the parsed string, of what is wrong
	// Err says what is wrong: a reason of the grammar, or the error of
	// Limit.Validate. It wraps ErrInvalidLimit.
	Err error
}

// Error returns e.g. `item 1 "0/s" at byte 6: quota 0 must be at least 1`.
func (e *ParseError) Error() string {
	return fmt.Sprintf("item %d %q at byte %d: %v", e.Index, e.Item, e.Offset, e.Err)
}

// Unwrap returns e.Err, which wraps ErrInvalidLimit.
func (e *ParseError) Unwrap() error { return e.Err }

// parseReason is what the grammar finds wrong: its text is the reason
// alone, and it wraps ErrInvalidLimit.
type parseReason struct{ msg string }

func (e *parseReason) Error() string { return e.msg }
func (e *parseReason) Unwrap() error { return ErrInvalidLimit }

// FormatLimits writes limits in the grammar of ParseLimits, one item per
// limit, separated by ", ": "10/s, 100/m gcra burst 20 name api". Fields
// at their zero value are left out, so ParseLimits(FormatLimits(ls...))
// returns ls for every ls that ParseLimits returns. Every field that is
// set is written, even one its algorithm does not take (a Burst on a
// sliding-window), which ParseLimits and Validate then reject.
func FormatLimits(limits ...Limit) string {
	b := make([]byte, 0, 16*len(limits))
	for i := range limits {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendLimit(b, &limits[i])
	}
	return string(b)
}

func appendLimit(b []byte, l *Limit) []byte {
	b = strconv.AppendInt(b, l.Quota, 10)
	b = append(b, '/')
	b = appendPeriod(b, l.Period, true)
	if l.Algorithm != SlidingWindow {
		b = append(b, ' ')
		b = append(b, l.Algorithm.String()...)
	}
	if l.Burst != 0 {
		b = append(b, " burst "...)
		b = strconv.AppendInt(b, l.Burst, 10)
	}
	if l.Precision != 0 {
		b = append(b, " precision "...)
		b = appendPeriod(b, l.Precision, false)
	}
	if l.Name != "" {
		b = append(b, " name "...)
		if isBareName(l.Name) {
			b = append(b, l.Name...)
		} else {
			b = strconv.AppendQuoteToASCII(b, l.Name)
		}
	}
	if l.Unit != "" {
		b = append(b, " unit "...)
		if isBareName(l.Unit) {
			b = append(b, l.Unit...)
		} else {
			b = strconv.AppendQuoteToASCII(b, l.Unit)
		}
	}
	return b
}

// appendPeriod writes d in its largest whole unit: "90s", "2h", "1500ms";
// with bare, a single second, minute, hour or day is the unit alone ("s").
func appendPeriod(b []byte, d time.Duration, bare bool) []byte {
	units := [...]struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"},
		{time.Millisecond, "ms"}, {time.Microsecond, "us"}, {1, "ns"}}
	for _, u := range units {
		if d > 0 && d%u.d == 0 {
			if n := d / u.d; n != 1 || !bare || u.d < time.Second {
				b = strconv.AppendInt(b, int64(n), 10)
			}
			return append(b, u.name...)
		}
	}
	b = strconv.AppendInt(b, int64(d), 10) // zero or negative: rejected when parsed
	return append(b, "ns"...)
}

// isBareName reports whether a name can be written unquoted.
func isBareName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !letterByte(c) && !digitByte(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// splitLimits returns the [start, end) spans of the items of s, split at
// the separators that are not inside a quoted name.
func splitLimits(s string) ([][2]int, error) {
	var spans [][2]int
	start, quote := 0, -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote >= 0:
			switch c {
			case '\\':
				i++
			case '"':
				quote = -1
			}
		case c == '"':
			quote = i
		case c == ',' || c == ';' || c == '|':
			spans = append(spans, [2]int{start, i})
			start = i + 1
		}
	}
	if quote >= 0 {
		p := limitParser{s: s, pos: start, end: len(s), index: len(spans)}
		p.trim()
		return nil, p.fail(quote, "unterminated quoted name")
	}
	return append(spans, [2]int{start, len(s)}), nil
}

// limitParser parses one item, s[pos:end].
type limitParser struct {
	s        string
	pos, end int
	index    int
	start    int    // offset of the trimmed item
	item     string // the trimmed item
}

// trim skips the item's surrounding spaces and records its text.
func (p *limitParser) trim() {
	for p.pos < p.end && spaceByte(p.s[p.pos]) {
		p.pos++
	}
	for p.end > p.pos && spaceByte(p.s[p.end-1]) {
		p.end--
	}
	p.start, p.item = p.pos, p.s[p.pos:p.end]
}

func (p *limitParser) fail(at int, format string, args ...any) error {
	return &ParseError{Index: p.index, Item: p.item, Offset: at, Err: &parseReason{fmt.Sprintf(format, args...)}}
}

func (p *limitParser) peek() byte {
	if p.pos < p.end {
		return p.s[p.pos]
	}
	return 0
}

// skipSpace skips spaces and reports whether there were any.
func (p *limitParser) skipSpace() bool {
	start := p.pos
	for p.pos < p.end && spaceByte(p.s[p.pos]) {
		p.pos++
	}
	return p.pos > start
}

// token returns the text from pos to the next space, for messages.
func (p *limitParser) token() string {
	i := p.pos
	for i < p.end && !spaceByte(p.s[i]) {
		i++
	}
	return p.s[p.pos:i]
}

func (p *limitParser) limit() (Limit, error) {
	var l Limit
	q, err := p.count("quota")
	if err != nil {
		return l, err
	}
	l.Quota = q
	if err := p.per(); err != nil {
		return l, err
	}
	if l.Period, err = p.period("period"); err != nil {
		return l, err
	}
	return l, p.options(&l)
}

// count parses a whole number of at least 1 and at most MaxQuota: a
// quota or a burst.
func (p *limitParser) count(what string) (int64, error) {
	start := p.pos
	var n int64
	digits, over := 0, false
	for ; p.pos < p.end; p.pos++ {
		c := p.s[p.pos]
		if c == '_' && digits > 0 && p.pos+1 < p.end && digitByte(p.s[p.pos+1]) {
			continue // 1_000
		}
		if !digitByte(c) {
			break
		}
		if n = n*10 + int64(c-'0'); n > MaxQuota {
			over, n = true, MaxQuota // keep n small: no overflow
		}
		digits++
	}
	text := p.s[start:p.pos]
	switch {
	case digits == 0:
		if what == "quota" {
			return 0, p.fail(start, "want a quota, a whole number, at the start, not %q", p.token())
		}
		return 0, p.fail(start, "%s needs a whole number, not %q", what, p.token())
	case p.peek() == '.':
		p.pos = start
		return 0, p.fail(start, "%s %q is not a whole number", what, p.token())
	case over:
		return 0, p.fail(start, "%s %s exceeds %d", what, text, int64(MaxQuota))
	case n < 1:
		return 0, p.fail(start, "%s %s must be at least 1", what, text)
	}
	return n, nil
}

// per parses what separates the quota from the period.
func (p *limitParser) per() error {
	p.skipSpace()
	switch {
	case p.peek() == '/':
		p.pos++
		p.skipSpace()
	case p.peek() == '-':
		p.pos++
		if rest := p.s[p.pos:p.end]; len(rest) >= 4 && strings.EqualFold(rest[:4], "per-") {
			p.pos += 4
		}
	case strings.EqualFold(p.token(), "per"):
		p.pos += 3
		if !p.skipSpace() {
			return p.fail(p.pos, "want a period after \"per\"")
		}
	default:
		return p.fail(p.pos, "want \"/\", \"per\" or \"-\" after the quota, not %q", p.token())
	}
	return nil
}

// period parses a unit ("s"), or numbers with units ("90s", "1h30m",
// "2 hours"), into a positive duration of at most MaxPeriod.
func (p *limitParser) period(what string) (time.Duration, error) {
	start := p.pos
	if letterByte(p.peek()) || microPrefix(p.s[p.pos:p.end]) > 0 {
		return p.unit()
	}
	var total time.Duration
	for parts := 0; ; parts++ {
		if !digitByte(p.peek()) {
			if parts == 0 {
				return 0, p.fail(start, "want a %s, such as s, 90s or 1.5h, not %q", what, p.token())
			}
			break
		}
		numStart := p.pos
		whole, frac, scale := p.number()
		num := p.s[numStart:p.pos]
		p.skipSpace()
		if !letterByte(p.peek()) && microPrefix(p.s[p.pos:p.end]) == 0 {
			return 0, p.fail(p.pos, "want a unit after %s (ms, s, m, h, d, ...), not %q", num, p.token())
		}
		u, err := p.unit()
		if err != nil {
			return 0, err
		}
		v, exact, ok := scaledPeriod(whole, frac, scale, u)
		switch {
		case !ok || v > MaxPeriod || total+v > MaxPeriod:
			return 0, p.fail(numStart, "%s %s exceeds %v", what, p.s[start:p.pos], MaxPeriod)
		case !exact:
			return 0, p.fail(numStart, "%s %s is not a whole number of nanoseconds", what, p.s[numStart:p.pos])
		}
		total += v
		save := p.pos
		p.skipSpace()
		if !digitByte(p.peek()) {
			p.pos = save
			break
		}
	}
	if total == 0 {
		return 0, p.fail(start, "%s %s must be positive", what, p.s[start:p.pos])
	}
	return total, nil
}

// number parses digits with an optional fraction: whole + frac/scale.
// Digits beyond what fits are a period too long, reported by scaled.
func (p *limitParser) number() (whole, frac, scale uint64) {
	scale = 1
	for p.pos < p.end && (digitByte(p.s[p.pos]) || p.s[p.pos] == '_' && p.pos+1 < p.end && digitByte(p.s[p.pos+1])) {
		if c := p.s[p.pos]; c != '_' {
			if whole < 1<<58 {
				whole = whole*10 + uint64(c-'0')
			} else {
				whole = 1 << 62 // saturate: too long a period anyway
			}
		}
		p.pos++
	}
	if p.peek() == '.' && p.pos+1 < p.end && digitByte(p.s[p.pos+1]) {
		p.pos++
		for p.pos < p.end && digitByte(p.s[p.pos]) {
			if scale < 1e18 {
				frac, scale = frac*10+uint64(p.s[p.pos]-'0'), scale*10
			} else if p.s[p.pos] != '0' {
				scale = 0 // more than 18 decimals that matter: not whole nanoseconds
			}
			p.pos++
		}
	}
	return whole, frac, scale
}

// scaledPeriod returns (whole + frac/scale) × unit. exact is false when that is
// not a whole number of nanoseconds (or scale is 0: too many decimals), and
// ok false when it overflows.
func scaledPeriod(whole, frac, scale uint64, unit time.Duration) (v time.Duration, exact, ok bool) {
	if scale == 0 {
		return 0, false, true
	}
	hi, lo := bits.Mul64(whole, uint64(unit))
	if hi != 0 || lo > 1<<62 {
		return 0, true, false
	}
	if frac != 0 {
		fhi, flo := bits.Mul64(frac, uint64(unit))
		q, r := bits.Div64(fhi, flo, scale) // frac < scale, so q < unit: no panic
		if r != 0 {
			return 0, false, true
		}
		lo += q
	}
	return time.Duration(lo), true, lo <= 1<<62
}

// unit parses a unit name.
func (p *limitParser) unit() (time.Duration, error) {
	start := p.pos
	for p.pos < p.end {
		if letterByte(p.s[p.pos]) {
			p.pos++
		} else if n := microPrefix(p.s[p.pos:p.end]); n > 0 {
			p.pos += n
		} else {
			break
		}
	}
	name := p.s[start:p.pos]
	switch strings.ToLower(name) {
	case "ns", "nsec", "nanosecond", "nanoseconds":
		return time.Nanosecond, nil
	case "us", "µs", "μs", "usec", "microsecond", "microseconds":
		return time.Microsecond, nil
	case "ms", "msec", "millisecond", "milliseconds":
		return time.Millisecond, nil
	case "s", "sec", "secs", "second", "seconds":
		return time.Second, nil
	case "m", "min", "mins", "minute", "minutes":
		return time.Minute, nil
	case "h", "hr", "hrs", "hour", "hours":
		return time.Hour, nil
	case "d", "day", "days":
		return 24 * time.Hour, nil
	case "w", "wk", "week", "weeks":
		return 7 * 24 * time.Hour, nil
	case "mo", "month", "months", "y", "yr", "year", "years":
		return 0, p.fail(start, "unit %q has no fixed length: write days, e.g. 30d", name)
	}
	return 0, p.fail(start, "unknown unit %q: want ms, s, m, h, d, w or their names", name)
}

// options parses the options after the rate into l.
func (p *limitParser) options(l *Limit) error {
	var burstAt, precAt, algAt, nameAt, unitAt = -1, -1, -1, -1, -1
	for {
		spaced := p.skipSpace()
		if p.pos >= p.end {
			break
		}
		at := p.pos
		if !spaced {
			return p.fail(at, "want a space before %q", p.token())
		}
		word := p.word()
		if word == "" {
			return p.fail(at, "want an option (an algorithm, burst, precision, name or unit), not %q", p.token())
		}
		key := strings.ToLower(word)
		seen := func(where *int) error {
			if *where >= 0 {
				return p.fail(at, "%s given twice", key)
			}
			*where = at
			p.skipSpace()
			if p.peek() == '=' {
				p.pos++
				p.skipSpace()
			}
			if p.pos >= p.end {
				return p.fail(at, "%s needs a value", key)
			}
			return nil
		}
		var err error
		switch key {
		case "burst":
			if err = seen(&burstAt); err == nil {
				l.Burst, err = p.count("burst")
			}
		case "precision":
			if err = seen(&precAt); err == nil {
				l.Precision, err = p.period("precision")
			}
		case "name":
			if err = seen(&nameAt); err == nil {
				l.Name, err = p.name()
			}
		case "unit":
			if err = seen(&unitAt); err == nil {
				l.Unit, err = p.name()
			}
		case "algorithm", "alg":
			if err = seen(&algAt); err == nil {
				vat := p.pos
				err = p.algorithm(l, p.word(), vat)
			}
		default:
			if _, ok := algorithmNamed(word); ok && algAt >= 0 {
				return p.fail(at, "algorithm given twice")
			}
			algAt = at
			err = p.algorithm(l, word, at)
		}
		if err != nil {
			return err
		}
	}
	switch {
	case burstAt >= 0 && !l.Algorithm.rated():
		return p.fail(burstAt, "burst applies to token-bucket, gcra and leaky-bucket, not %v", l.Algorithm)
	case precAt >= 0 && l.Algorithm != BucketedWindow:
		return p.fail(precAt, "precision applies to bucketed-window, not %v", l.Algorithm)
	}
	return nil
}

// word returns the text up to the next space or '='.
func (p *limitParser) word() string {
	start := p.pos
	for p.pos < p.end && !spaceByte(p.s[p.pos]) && p.s[p.pos] != '=' && p.s[p.pos] != '"' {
		p.pos++
	}
	return p.s[start:p.pos]
}

func (p *limitParser) algorithm(l *Limit, word string, at int) error {
	a, ok := algorithmNamed(word)
	if !ok {
		return p.fail(at, "unknown option %q: want an algorithm (%s), burst, precision, name or unit", word, algorithmList())
	}
	l.Algorithm = a
	return nil
}

// algorithmNamed returns the algorithm a word names, ignoring case, '-'
// and '_'.
func algorithmNamed(word string) (Algorithm, bool) {
	norm := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return -1
		}
		return r
	}, strings.ToLower(word))
	for _, a := range Algorithms() {
		if norm != "" && norm == strings.ReplaceAll(a.String(), "-", "") {
			return a, true
		}
	}
	return 0, false
}

// algorithmList returns the algorithms' names, separated by commas.
func algorithmList() string {
	var names []string
	for _, a := range Algorithms() {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}

// name parses a name: a Go quoted string, or the text up to the next
// space.
func (p *limitParser) name() (string, error) {
	start := p.pos
	if p.peek() != '"' {
		for p.pos < p.end && !spaceByte(p.s[p.pos]) {
			p.pos++
		}
		return p.s[start:p.pos], nil
	}
	for p.pos++; p.pos < p.end; p.pos++ {
		switch p.s[p.pos] {
		case '\\':
			p.pos++
		case '"':
			p.pos++
			name, err := strconv.Unquote(p.s[start:p.pos])
			if err != nil {
				return "", p.fail(start, "name %s is not a valid quoted string", p.s[start:p.pos])
			}
			return name, nil
		}
	}
	return "", p.fail(start, "unterminated quoted name")
}

func spaceByte(c byte) bool  { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func digitByte(c byte) bool  { return '0' <= c && c <= '9' }
func letterByte(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// microPrefix returns the length of a micro sign (U+00B5) or Greek mu
// (U+03BC) at the start of s, as time.ParseDuration accepts both, or 0.
func microPrefix(s string) int {
	if strings.HasPrefix(s, "µ") || strings.HasPrefix(s, "μ") {
		return 2
	}
	return 0
}
