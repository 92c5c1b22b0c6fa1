package guard

import (
	"math/bits"
	"slices"
	"strconv"
	"time"
	"unsafe"

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
	// seconds, and qu its unit when it has one (Limit.QuotaUnit: a
	// Concurrency limit's is "concurrent-requests", and its w its lease).
	// A Period that is not a whole number of seconds is sent with q and w
	// scaled to the smallest
	// integers of the same rate: 3 per 1.5s is q=6;w=3, 10 per 100ms is
	// q=100;w=1. Where those do not fit an sf-integer (15 digits), w is
	// the Period rounded up to whole seconds and q the most units that w
	// admits at the real rate, rounded down (and at most 15 digits): the
	// rate sent is then a little lower than the real one, never higher, so
	// a client that paces itself on it is never denied for it.
	//
	// One RateLimit-Policy lists the policies of every middleware the
	// request crossed (see Chain), each limiter state once, in the order
	// they ran. Names are unique in a response: a limit whose name an
	// earlier one in the list has gets the suffix "-2" (or "-3", ..., the
	// first free), in RateLimit and in the 429 body's violated-policies
	// alike; a route lists the same policies in the same order on every
	// response, so its names are stable too.
	//
	// RateLimit has one item per limiter state decided: its binding limit
	// (the one that denied, or the one closest to exhaustion), r its
	// remaining units, and t its effective window, draft-11 §4.1.2: "the
	// number of seconds within which the client can use no more than the
	// available quota" (core.Decision.EffectiveWindow), rounded up to whole
	// seconds, so that it is never earlier than the truth. It says
	// nothing of when the whole quota is back (§8.4: it "does not imply
	// anything about when the server will increase the available quota"),
	// and is never the time until the limit is fully replenished, which
	// overstates it (up to 2w for a sliding window). A state decided by
	// the FailOpen policy (core.FromFailOpen) has no item: it has no
	// numbers to send; nor has a state that denied a cost above a limit's
	// capacity, whose full quota would not help (see Denial.Capacity).
	//
	// Names are sf-strings: bytes that an sf-string cannot hold are
	// replaced by '?', and names are cut at core.MaxNameLen bytes. This is
	// the default.
	HeadersDraft11 HeaderStyle = iota
	// HeadersDraft06 sends the fields of draft-ietf-httpapi-ratelimit-headers-06
	// for the limit with the least remaining over all rules of every
	// middleware on the request's chain, as that draft requires ("the
	// server MUST reply with the RateLimit header fields
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

// item is the numbers of one RateLimit item (or of the draft-06 fields).
type item struct {
	quota     int64
	remaining int64
	window    time.Duration // the effective window
}

// A listing is what the rate-limit headers of one response describe: the
// entries of the request's chain, in order, then further policies listed
// without a RateLimit item: those of rules a denial kept from being
// consulted, and those the middlewares inside learned for the route.
type listing struct {
	entries []entry
	buf     []byte // scratch space for the values built, empty
	extra   []core.Limit
	dn      *Denial // the denial answered, or nil
	denied  int     // the denying entry, when dn is not nil
	// violated are the indexes of the denying entry's violated limits
	// among its limits, when dn is not nil.
	violated []int
}

// setHeaders sets the rate-limit headers of ls in g's style, and
// Retry-After on a denial that blocks. For a denial it returns the names
// of the violated policies, as the headers name them.
//
// A FailOpen decision (core.FromFailOpen) knows no numbers: its rule's
// limits are listed in the draft-11 RateLimit-Policy, so that the list
// stays the same on every response, but it has no RateLimit item, and
// nothing in the draft-06 and legacy styles; so for a cost above capacity.
func (g *Guard) setHeaders(w Writer, ls *listing) []string {
	dn := ls.dn
	if g.style == HeadersNone && dn == nil {
		return nil
	}
	pc := g.policies(ls)
	out := sinkOf(w)
	switch g.style {
	case HeadersDraft11:
		out.setPolicy(pc)
		b := ls.buf
		off := 0
		for i := range ls.entries {
			e := &ls.entries[i]
			if !e.hidden() {
				j, it := e.item()
				if len(b) > 0 {
					b = append(b, ", "...)
				}
				b = append(b, pc.enc[off+j]...)
				b = append(b, ";r="...)
				b = appendInt(b, clampSF(it.remaining))
				b = append(b, ";t="...)
				b = appendInt(b, ceilSeconds(it.window))
			}
			off += e.numLimits()
		}
		if len(b) > 0 {
			out.setBytes(HeaderRateLimit, b)
		}
	case HeadersDraft06, HeadersLegacy:
		at := binding(ls)
		if at < 0 {
			break
		}
		_, it := ls.entries[at].item()
		reset := ceilSeconds(it.window)
		if dn != nil && at == ls.denied && !dn.DryRun && dn.RetryAfter > 0 {
			reset = ceilSeconds(dn.RetryAfter) // draft-06: the same point in time as Retry-After
		}
		names := [3]string{HeaderRateLimitLimit, HeaderRateLimitRemaining, HeaderRateLimitReset}
		if g.style == HeadersLegacy {
			names = [3]string{HeaderXRateLimitLimit, HeaderXRateLimitRemaining, HeaderXRateLimitReset}
			if g.resetUnix {
				reset = unixSeconds(g.now(), reset)
			}
		} else {
			out.setPolicy(pc)
		}
		out.setBytes(names[0], appendInt(ls.buf, clampSF(it.quota)))
		out.setBytes(names[1], appendInt(ls.buf, clampSF(it.remaining)))
		out.setBytes(names[2], appendInt(ls.buf, reset))
	}
	if dn == nil {
		return nil
	}
	if !dn.DryRun && dn.RetryAfter > 0 {
		out.setBytes(HeaderRetryAfter, appendInt(ls.buf, ceilSeconds(dn.RetryAfter)))
	}
	off := 0
	for i := range ls.denied {
		off += ls.entries[i].numLimits()
	}
	names := make([]string, 0, len(ls.violated))
	for _, j := range ls.violated {
		names = append(names, pc.names[off+j])
	}
	return names
}

// binding returns the index of the entry whose numbers the draft-06 and
// legacy fields carry: the denying one, or the one with the least
// remaining; -1 when every one is hidden.
func binding(ls *listing) int {
	if ls.dn != nil && ls.denied < len(ls.entries) && !ls.entries[ls.denied].hidden() {
		return ls.denied
	}
	at := -1
	var least int64
	for i := range ls.entries {
		e := &ls.entries[i]
		if e.hidden() {
			continue
		}
		if _, it := e.item(); at < 0 || it.remaining < least {
			at, least = i, it.remaining
		}
	}
	return at
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

// policyCache is what the headers say of a listing's policies: their
// names and the RateLimit-Policy value. A Guard keeps the last one.
type policyCache struct {
	limits []core.Limit // the limits listed, in order
	counts []int        // for each entry, its number of limits
	hidden []bool       // for each entry, whether it is hidden
	names  []string     // each limit's name in the headers: cleaned and unique
	enc    []string     // the names as sf-strings
	value  string       // RateLimit-Policy in the Guard's style
	list   []string     // []string{value}, set on every HeaderWriter's response (see HeaderWriter)
	// one is the only limit, when pc lists one entry of one limit, shown,
	// and no extra policy: most listings, which matches checks at once.
	one *core.Limit
}

// policySlots is how many listings a Guard keeps the policies of: enough
// for the tiers of a WithLimitsFunc (free, pro, ...) whose requests
// alternate, which one slot would rebuild on every request.
const policySlots = 4

// policies returns the policyCache of ls: one the Guard kept when it lists
// the same, so that a route's requests (per tier) build it once.
func (g *Guard) policies(ls *listing) *policyCache {
	for i := range g.policy {
		if pc := g.policy[i].Load(); pc != nil && pc.matches(ls) {
			return pc
		}
	}
	pc := &policyCache{counts: make([]int, len(ls.entries)), hidden: make([]bool, len(ls.entries))}
	for i := range ls.entries {
		e := &ls.entries[i]
		pc.counts[i], pc.hidden[i] = e.numLimits(), e.hidden()
		for j, n := 0, e.numLimits(); j < n; j++ {
			pc.limits = append(pc.limits, *e.limit(j))
		}
	}
	pc.limits = append(pc.limits, ls.extra...)
	pc.names = uniqueNames(pc.limits)
	pc.enc = make([]string, len(pc.names))
	for i, n := range pc.names {
		pc.enc[i] = string(appendSFString(nil, n))
	}
	pc.value = g.policyValue(pc)
	pc.list = []string{pc.value}
	if len(pc.counts) == 1 && pc.counts[0] == 1 && !pc.hidden[0] && len(pc.limits) == 1 {
		pc.one = &pc.limits[0]
	}
	if ls.extra == nil { // the lists of denials, with extra policies, are not kept
		g.policy[g.nextPolicy.Add(1)%policySlots].Store(pc)
	}
	return pc
}

// matches reports whether pc is the policyCache of ls. It runs on every
// request, and copies nothing.
func (pc *policyCache) matches(ls *listing) bool {
	if len(ls.entries) == 1 && pc.one != nil && ls.extra == nil {
		// One entry of one limit (a Decision of one has no States), shown:
		// what the loops below would check of it.
		if e := &ls.entries[0]; e.d.States == nil && !e.hidden() {
			return sameLimit(&e.d.Limit, pc.one)
		}
	}
	if len(ls.entries) != len(pc.hidden) {
		return false
	}
	n := 0
	for i := range ls.entries {
		e := &ls.entries[i]
		k := e.numLimits()
		if k != pc.counts[i] || e.hidden() != pc.hidden[i] || n+k > len(pc.limits) {
			return false
		}
		for j := range k {
			if !sameLimit(e.limit(j), &pc.limits[n+j]) {
				return false
			}
		}
		n += k
	}
	if len(pc.limits)-n != len(ls.extra) {
		return false
	}
	for i := range ls.extra {
		if !sameLimit(&ls.extra[i], &pc.limits[n+i]) {
			return false
		}
	}
	return true
}

// sameLimit reports whether *a == *b, field by field and inlined: the
// compiler's == on a Limit calls a function of its own, and matches runs
// on every response. TestSameLimitIsEquality holds it to ==, for every
// field Limit has.
func sameLimit(a, b *core.Limit) bool {
	return a.Quota == b.Quota && a.Period == b.Period && a.Burst == b.Burst && a.Precision == b.Precision &&
		a.Algorithm == b.Algorithm && sameString(a.Name, b.Name) && sameString(a.Unit, b.Unit)
}

// sameString reports whether a == b, without calling the runtime's
// memequal when they are empty or share their bytes: a listing's limits
// and the policyCache's are copies of the Limiter's, whose strings they
// share.
func sameString(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// uniqueNames returns the names the headers give limits: PolicyName,
// cleaned as an sf-string holds it (see cleanName), and made unique within
// the list: a name already given to an earlier limit gets the suffix "-2",
// or "-3", and so on, the first that is free (the name cut so that it
// stays within core.MaxNameLen bytes).
func uniqueNames(limits []core.Limit) []string {
	names := make([]string, len(limits))
	for i := range limits {
		base := cleanName(limits[i].PolicyName())
		n := base
		for k := 2; slices.Contains(names[:i], n); k++ {
			suffix := "-" + strconv.Itoa(k)
			n = base[:min(len(base), core.MaxNameLen-len(suffix))] + suffix
		}
		names[i] = n
	}
	return names
}

// policyValue returns the RateLimit-Policy value of pc in g's style: every
// limit for draft-11; for draft-06, those of the entries not hidden and the
// extra ones, one per quota.
func (g *Guard) policyValue(pc *policyCache) string {
	var buf [256]byte
	b := buf[:0]
	switch g.style {
	case HeadersDraft11:
		for i := range pc.limits {
			if i > 0 {
				b = append(b, ", "...)
			}
			l := &pc.limits[i]
			q, w := quotaWindow(l.Quota, l.Period)
			b = append(b, pc.enc[i]...)
			b = append(b, ";q="...)
			b = strconv.AppendInt(b, q, 10)
			if u := l.QuotaUnit(); u != "" {
				b = append(b, ";qu="...)
				b = appendSFString(b, u)
			}
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, w, 10)
		}
	case HeadersDraft06:
		b = appendDraft06Policies(b, pc)
	}
	return string(b)
}

// appendDraft06Policies appends the draft-06 RateLimit-Policy items of pc:
// "q;w=w", one per quota, since the draft forbids two policies with the
// same quota: of limits with the same q, the one with the longest window.
// Hidden entries have none.
func appendDraft06Policies(b []byte, pc *policyCache) []byte {
	type qw struct{ q, w int64 }
	var items []qw
	add := func(l *core.Limit) {
		q, w := quotaWindow(l.Quota, l.Period)
		for j := range items {
			if items[j].q == q {
				items[j].w = max(items[j].w, w)
				return
			}
		}
		items = append(items, qw{q, w})
	}
	// The limits of entry i follow those of entry i-1; hidden entries'
	// are skipped. What follows the last entry's are the extra ones.
	n := 0
	for i, k := range pc.counts {
		if !pc.hidden[i] {
			for j := n; j < n+k; j++ {
				add(&pc.limits[j])
			}
		}
		n += k
	}
	for j := n; j < len(pc.limits); j++ {
		add(&pc.limits[j])
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
