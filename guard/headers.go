package guard

import (
	"math/bits"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/core"
)

// HeaderStyle selects the rate-limit headers a Guard sends.
type HeaderStyle uint8

const (
	// HeadersDraft11 sends the fields of draft-ietf-httpapi-ratelimit-headers-11,
	// Structured Field Lists (RFC 9651):
	//
	//	RateLimit-Policy: "per-minute";q=100;w=60, "per-hour";q=1000;w=3600
	//	RateLimit: "per-minute";r=42;t=17
	//
	// RateLimit-Policy has one item per limit, q its Quota, w its Period in
	// seconds, and qu its Unit when it has one. A Period that is not a
	// whole number of seconds is sent with q and w scaled to the smallest
	// integers of the same rate: 3 per 1.5s is q=6;w=3, 10 per 100ms is
	// q=100;w=1. Where those do not fit an sf-integer (15 digits), w is
	// the Period rounded up to whole seconds and q the most units that w
	// admits at the real rate, rounded down (and at most 15 digits): the
	// rate sent is then a little lower than the real one, never higher, so
	// a client that paces itself on it is never denied for it.
	//
	// RateLimit has one item per rule decided: its binding limit (the one
	// that denied, or the one closest to exhaustion), r its remaining
	// units, and t its effective window, draft-11 §4.1.2: "the number of
	// seconds within which the client can use no more than the available
	// quota" (core.Decision.EffectiveWindow), rounded up to whole seconds,
	// so that it is never earlier than the truth. It says nothing of when
	// the whole quota is back (§8.4: it "does not imply anything about
	// when the server will increase the available quota"), and is never
	// the time until the limit is fully replenished, which overstates it
	// (up to 2w for a sliding window). A rule decided by the FailOpen
	// policy (core.FromFailOpen) has no item: it has no numbers to send;
	// nor has a rule that denied a cost above a limit's capacity, whose
	// full quota would not help (see Denial.Capacity).
	//
	// Names are sf-strings: bytes that an sf-string cannot hold are
	// replaced by '?', and names are cut at core.MaxNameLen bytes. This is
	// the default.
	HeadersDraft11 HeaderStyle = iota
	// HeadersDraft06 sends the fields of draft-ietf-httpapi-ratelimit-headers-06
	// for the limit with the least remaining over all rules, as that draft
	// requires ("the server MUST reply with the RateLimit header fields
	// related to the time window with the lower RateLimit-Remaining"), or
	// for the one that denied; rules decided by FailOpen are left out, and
	// with none left no field is sent:
	//
	//	RateLimit-Limit: 100
	//	RateLimit-Remaining: 42
	//	RateLimit-Reset: 17
	//	RateLimit-Policy: 100;w=60, 1000;w=3600
	//
	// RateLimit-Reset is that limit's effective window in seconds, rounded
	// up, as t of HeadersDraft11; on a 429 it equals Retry-After, as the
	// draft asks. Quota and window are scaled as in HeadersDraft11. The
	// draft forbids two policies with the same quota: of those, only the
	// one with the longest window (the lowest rate) is listed.
	HeadersDraft06
	// HeadersLegacy sends X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset with the values of HeadersDraft06. The reset is a
	// delta in seconds, like the drafts', unless WithLegacyReset(ResetUnix)
	// asks for Unix time.
	HeadersLegacy
	// HeadersNone sends no rate-limit headers. A 429 still carries
	// Retry-After, which is plain HTTP.
	HeadersNone

	numStyles
)

// Header names, in canonical form (see Writer.SetHeader).
const (
	HeaderRateLimit           = "Ratelimit"
	HeaderRateLimitPolicy     = "Ratelimit-Policy"
	HeaderRateLimitLimit      = "Ratelimit-Limit"
	HeaderRateLimitRemaining  = "Ratelimit-Remaining"
	HeaderRateLimitReset      = "Ratelimit-Reset"
	HeaderXRateLimitLimit     = "X-Ratelimit-Limit"
	HeaderXRateLimitRemaining = "X-Ratelimit-Remaining"
	HeaderXRateLimitReset     = "X-Ratelimit-Reset"
	HeaderRetryAfter          = "Retry-After"
	HeaderContentType         = "Content-Type"
)

// maxSFInt is the largest sf-integer (RFC 9651: at most 15 digits).
const maxSFInt = 999_999_999_999_999

// ceilSeconds returns d in whole seconds, rounded up, within [0, maxSFInt].
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return min(s, maxSFInt)
}

// clampSF bounds n to what an sf-integer (and a sane header) can hold.
func clampSF(n int64) int64 { return min(max(n, 0), maxSFInt) }

// item is what one RateLimit item (or the draft-06 single values) says.
type item struct {
	name      string
	quota     int64
	remaining int64
	window    time.Duration // the effective window
}

// itemOf returns the item of t's binding limit: for a request denied for
// its queueing delay, the LeakyBucket limit with the longest delay.
func itemOf(t *taken, dn *Denial) item {
	d := &t.d
	if dn != nil && dn.Rule == t.rule && dn.Queued {
		return queuedItem(d)
	}
	return item{name: d.Limit.PolicyName(), quota: d.Limit.Quota, remaining: d.Remaining, window: d.EffectiveWindow}
}

// queuedItem returns the item of the LeakyBucket limit of d with the
// longest delay.
func queuedItem(d *core.Decision) item {
	var it item
	var longest time.Duration = -1
	d.Each(func(s core.LimitState) {
		if s.Limit.Algorithm == core.LeakyBucket && s.Delay > longest {
			longest = s.Delay
			it = item{name: s.Limit.PolicyName(), quota: s.Limit.Quota, remaining: s.Remaining, window: s.EffectiveWindow}
		}
	})
	return it
}

// hidden reports whether t's decision has no item: a FailOpen one, which
// knows no numbers, or the one that denied a cost above a limit's
// capacity, whose numbers would invite a retry that cannot succeed.
func hidden(t *taken, dn *Denial) bool {
	return t.d.Source == core.FromFailOpen || (dn != nil && dn.Rule == t.rule && dn.Capacity > 0)
}

// binding returns the index in ts of the binding rule: the denying one, or
// the one with the least remaining; -1 when every one is hidden.
func binding(ts []taken, dn *Denial) int {
	at := -1
	for i := range ts {
		if hidden(&ts[i], dn) {
			continue
		}
		if dn != nil && ts[i].rule == dn.Rule {
			return i
		}
		if at < 0 || ts[i].d.Remaining < ts[at].d.Remaining {
			at = i
		}
	}
	return at
}

// setHeaders sets the rate-limit headers of ts, and Retry-After on a
// denial that blocks.
//
// A FailOpen decision (core.FromFailOpen) knows no numbers: its rule's
// limits are listed in the draft-11 RateLimit-Policy, so that the list
// stays the same on every response, but it has no RateLimit item, and
// nothing in the draft-06 and legacy styles.
func (g *Guard) setHeaders(w Writer, ts []taken, dn *Denial) {
	if len(ts) > 0 {
		switch g.style {
		case HeadersDraft11:
			// Behind an outer middleware (app-wide, over a route's own),
			// append to its lists: the client sees every policy it is under.
			var outerPolicy, outerLimit string
			if hg, ok := w.(HeaderGetter); ok {
				outerPolicy, outerLimit = hg.GetHeader(HeaderRateLimitPolicy), hg.GetHeader(HeaderRateLimit)
			}
			policy := g.policyValue(ts)
			if outerPolicy != "" {
				policy = outerPolicy + ", " + policy
			}
			w.SetHeader(HeaderRateLimitPolicy, policy)
			var buf [128]byte
			b := append(buf[:0], outerLimit...)
			for i := range ts {
				if hidden(&ts[i], dn) {
					continue
				}
				if len(b) > 0 {
					b = append(b, ", "...)
				}
				it := itemOf(&ts[i], dn)
				b = appendSFString(b, it.name)
				b = append(b, ";r="...)
				b = strconv.AppendInt(b, clampSF(it.remaining), 10)
				b = append(b, ";t="...)
				b = strconv.AppendInt(b, ceilSeconds(it.window), 10)
			}
			if len(b) > len(outerLimit) {
				w.SetHeader(HeaderRateLimit, string(b))
			}
		case HeadersDraft06, HeadersLegacy:
			ts := measured(ts)
			at := binding(ts, dn)
			if at < 0 {
				break
			}
			it := itemOf(&ts[at], dn)
			reset := ceilSeconds(it.window)
			if dn != nil && !dn.DryRun && dn.RetryAfter > 0 {
				reset = ceilSeconds(dn.RetryAfter) // draft-06: the same point in time as Retry-After
			}
			names := [3]string{HeaderRateLimitLimit, HeaderRateLimitRemaining, HeaderRateLimitReset}
			if g.style == HeadersLegacy {
				names = [3]string{HeaderXRateLimitLimit, HeaderXRateLimitRemaining, HeaderXRateLimitReset}
				if g.resetUnix {
					reset = unixSeconds(g.now(), reset)
				}
			} else {
				w.SetHeader(HeaderRateLimitPolicy, g.policyValue(ts))
			}
			w.SetHeader(names[0], strconv.FormatInt(clampSF(it.quota), 10))
			w.SetHeader(names[1], strconv.FormatInt(clampSF(it.remaining), 10))
			w.SetHeader(names[2], strconv.FormatInt(reset, 10))
		}
	}
	if dn != nil && !dn.DryRun && dn.RetryAfter > 0 {
		w.SetHeader(HeaderRetryAfter, strconv.FormatInt(ceilSeconds(dn.RetryAfter), 10))
	}
}

// unixSeconds returns the Unix time, in whole seconds rounded up, delta
// seconds after now.
func unixSeconds(now time.Time, delta int64) int64 {
	s := now.Unix()
	if now.Nanosecond() > 0 {
		s++
	}
	return s + delta
}

// measured returns the decisions of ts that carry numbers: ts itself,
// unless some are FailOpen's.
func measured(ts []taken) []taken {
	for i := range ts {
		if ts[i].d.Source == core.FromFailOpen {
			m := make([]taken, 0, len(ts)-1)
			for j := range ts {
				if ts[j].d.Source != core.FromFailOpen {
					m = append(m, ts[j])
				}
			}
			return m
		}
	}
	return ts
}

// eachLimit calls fn with every limit of t: those of its decision or, for
// a FailOpen decision, the key's limits.
func (t *taken) eachLimit(fn func(l core.Limit)) {
	if t.d.Source == core.FromFailOpen {
		for _, l := range t.limits {
			fn(l)
		}
		return
	}
	t.d.Each(func(s core.LimitState) { fn(s.Limit) })
}

// policyCache is a RateLimit-Policy value and the limits it lists.
type policyCache struct {
	limits []core.Limit
	value  string
}

// policyValue returns the RateLimit-Policy value listing every limit of
// ts, from the cache when the limits are those of the last request.
func (g *Guard) policyValue(ts []taken) string {
	pc := g.policy.Load()
	if pc != nil && pc.matches(ts) {
		return pc.value
	}
	var buf [256]byte
	b := buf[:0]
	n := 0
	if g.style == HeadersDraft06 {
		b = appendDraft06Policies(b, ts)
	} else {
		for i := range ts {
			ts[i].eachLimit(func(l core.Limit) {
				if n > 0 {
					b = append(b, ", "...)
				}
				n++
				b = g.appendPolicyItem(b, &l)
			})
		}
	}
	v := string(b)
	if len(ts) == len(g.rules) { // partial lists (a rule denied early) are not cached
		var limits []core.Limit
		for i := range ts {
			ts[i].eachLimit(func(l core.Limit) { limits = append(limits, l) })
		}
		g.policy.Store(&policyCache{limits: limits, value: v})
	}
	return v
}

// appendDraft06Policies appends the draft-06 RateLimit-Policy items of ts:
// "q;w=w", one per quota, since the draft forbids two policies with the
// same quota; of limits with the same q, the one with the longest window.
func appendDraft06Policies(b []byte, ts []taken) []byte {
	type qw struct{ q, w int64 }
	var items []qw
	for i := range ts {
		ts[i].eachLimit(func(l core.Limit) {
			q, w := quotaWindow(l.Quota, l.Period)
			for j := range items {
				if items[j].q == q {
					items[j].w = max(items[j].w, w)
					return
				}
			}
			items = append(items, qw{q, w})
		})
	}
	for i, it := range items {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, it.q, 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, it.w, 10)
	}
	return b
}

func (pc *policyCache) matches(ts []taken) bool {
	n := 0
	ok := true
	match := func(l *core.Limit) {
		ok = ok && n < len(pc.limits) && pc.limits[n] == *l
		n++
	}
	for i := range ts { // eachLimit, without copies: this runs on every request
		t := &ts[i]
		switch {
		case t.d.Source == core.FromFailOpen:
			for j := range t.limits {
				match(&t.limits[j])
			}
		case t.d.States == nil:
			match(&t.d.Limit)
		default:
			for j := range t.d.States {
				match(&t.d.States[j].Limit)
			}
		}
	}
	return ok && n == len(pc.limits)
}

// appendPolicyItem appends l's RateLimit-Policy item in g's style.
func (g *Guard) appendPolicyItem(b []byte, l *core.Limit) []byte {
	q, w := quotaWindow(l.Quota, l.Period)
	if g.style == HeadersDraft11 {
		b = appendSFString(b, l.PolicyName())
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, q, 10)
		if l.Unit != "" {
			b = append(b, ";qu="...)
			b = appendSFString(b, l.Unit)
		}
	} else {
		b = strconv.AppendInt(b, q, 10)
	}
	b = append(b, ";w="...)
	return strconv.AppendInt(b, w, 10)
}

// quotaWindow returns q and w, the policy's quota and window in whole
// seconds, for quota units per period p: the smallest integers of the same
// rate, q = quota·k and w = p·k for the least k that makes w whole. When
// they do not fit an sf-integer, w is p rounded up to whole seconds and q
// the most units w admits at the real rate, rounded down, at most maxSFInt:
// a rate a little lower than the real one, never higher, so that a client
// pacing itself on q/w is never denied for it.
func quotaWindow(quota int64, p time.Duration) (q, w int64) {
	quota = clampSF(quota)
	if p <= 0 {
		return quota, 1
	}
	ns := int64(p)
	g := gcd(ns, int64(time.Second))
	k := int64(time.Second) / g // the least k with k·p whole seconds
	w = ns / g                  // k·p, in seconds
	if w <= maxSFInt && quota <= maxSFInt/k {
		return quota * k, w
	}
	w = max(1, ceilSeconds(p))
	// q = ⌊quota · w·10⁹ / ns⌋, in 128 bits.
	hi, lo := bits.Mul64(uint64(quota), uint64(w)*uint64(time.Second))
	if hi >= uint64(ns) { // the quotient needs more than 64 bits
		return maxSFInt, w
	}
	qq, _ := bits.Div64(hi, lo, uint64(ns))
	return int64(min(qq, maxSFInt)), w
}

// gcd returns the greatest common divisor of a and b, both positive.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// appendSFString appends s as an RFC 9651 sf-string: quoted, with '"' and
// '\' escaped, bytes outside printable ASCII replaced by '?', cut at
// core.MaxNameLen bytes.
func appendSFString(b []byte, s string) []byte {
	if len(s) > core.MaxNameLen {
		s = s[:core.MaxNameLen]
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// cleanName returns s as the sf-string holds it, unquoted and unescaped:
// cut at core.MaxNameLen bytes, bytes outside printable ASCII replaced by
// '?'. It allocates only when s needs cleaning.
func cleanName(s string) string {
	if len(s) > core.MaxNameLen {
		s = s[:core.MaxNameLen]
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] < 0x20 || b[j] > 0x7e {
					b[j] = '?'
				}
			}
			return string(b)
		}
	}
	return s
}
