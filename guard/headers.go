package guard

import (
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
	// RateLimit-Policy has one item per limit of every rule decided;
	// RateLimit one item per rule: its binding limit (the one closest to
	// exhaustion, or the one that denied), except for a rule decided by the
	// FailOpen policy (core.FromFailOpen), which has no numbers to send.
	// Names are sf-strings: bytes that an sf-string cannot hold are
	// replaced by '?', and names are cut at core.MaxNameLen bytes. w and t
	// are whole seconds rounded up; t is a delta, never an epoch. This is
	// the default.
	HeadersDraft11 HeaderStyle = iota
	// HeadersDraft06 sends the fields of draft-ietf-httpapi-ratelimit-headers-06,
	// for the binding limit over all rules (those decided by FailOpen left
	// out; with none left, no field):
	//
	//	RateLimit-Limit: 100
	//	RateLimit-Remaining: 42
	//	RateLimit-Reset: 17
	//	RateLimit-Policy: 100;w=60, 1000;w=3600
	HeadersDraft06
	// HeadersLegacy sends X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset with the values of HeadersDraft06. The reset is a
	// delta in seconds, like the drafts', not an epoch.
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
	reset     int64 // seconds
}

// itemOf returns the item of t's binding limit; on a denied response
// (dn != nil) the denying rule's item has t = Retry-After, so that
// Retry-After is never earlier than it.
func itemOf(t *taken, dn *Denial) item {
	d := &t.d
	it := item{name: d.Limit.PolicyName(), quota: d.Limit.Quota, remaining: d.Remaining, reset: ceilSeconds(d.ResetAfter)}
	if dn == nil || dn.Rule != t.rule {
		return it
	}
	if dn.Queued {
		it = queuedItem(d)
	}
	if dn.RetryAfter > 0 {
		it.reset = ceilSeconds(dn.RetryAfter)
	}
	return it
}

// queuedItem returns the item of the LeakyBucket limit of d with the
// longest delay.
func queuedItem(d *core.Decision) item {
	var it item
	var longest time.Duration
	d.Each(func(s core.LimitState) {
		if s.Delay > longest {
			longest = s.Delay
			it = item{name: s.Limit.PolicyName(), quota: s.Limit.Quota, remaining: s.Remaining}
		}
	})
	return it
}

// binding returns the index in ts of the binding rule: the denying one, or
// the one with the least remaining.
func binding(ts []taken, dn *Denial) int {
	at := 0
	for i := range ts {
		if dn != nil {
			if ts[i].rule == dn.Rule {
				return i
			}
			continue
		}
		if ts[i].d.Remaining < ts[at].d.Remaining {
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
				if ts[i].d.Source == core.FromFailOpen {
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
				b = strconv.AppendInt(b, clampSF(it.reset), 10)
			}
			if len(b) > len(outerLimit) {
				w.SetHeader(HeaderRateLimit, string(b))
			}
		case HeadersDraft06, HeadersLegacy:
			ts := measured(ts)
			if len(ts) == 0 {
				break
			}
			it := itemOf(&ts[binding(ts, dn)], dn)
			names := [3]string{HeaderRateLimitLimit, HeaderRateLimitRemaining, HeaderRateLimitReset}
			if g.style == HeadersLegacy {
				names = [3]string{HeaderXRateLimitLimit, HeaderXRateLimitRemaining, HeaderXRateLimitReset}
			} else {
				w.SetHeader(HeaderRateLimitPolicy, g.policyValue(ts))
			}
			w.SetHeader(names[0], strconv.FormatInt(clampSF(it.quota), 10))
			w.SetHeader(names[1], strconv.FormatInt(clampSF(it.remaining), 10))
			w.SetHeader(names[2], strconv.FormatInt(clampSF(it.reset), 10))
		}
	}
	if dn != nil && !dn.DryRun && dn.RetryAfter > 0 {
		w.SetHeader(HeaderRetryAfter, strconv.FormatInt(ceilSeconds(dn.RetryAfter), 10))
	}
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
	for i := range ts {
		ts[i].eachLimit(func(l core.Limit) {
			if n > 0 {
				b = append(b, ", "...)
			}
			n++
			b = g.appendPolicyItem(b, &l)
		})
	}
	v := string(b)
	if len(ts) == len(g.rules) { // partial lists (a rule denied early) are not cached
		limits := make([]core.Limit, 0, n)
		for i := range ts {
			ts[i].eachLimit(func(l core.Limit) { limits = append(limits, l) })
		}
		g.policy.Store(&policyCache{limits: limits, value: v})
	}
	return v
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
	if g.style == HeadersDraft11 {
		b = appendSFString(b, l.PolicyName())
		b = append(b, ";q="...)
	}
	b = strconv.AppendInt(b, clampSF(l.Quota), 10)
	b = append(b, ";w="...)
	return strconv.AppendInt(b, max(1, ceilSeconds(l.Period)), 10)
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
