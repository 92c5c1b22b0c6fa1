package redisstore

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/core/engine"
)

// A script is a version of apply.lua: its text and the SHA-1 that EVALSHA
// runs it by.
type script struct {
	src, sha string
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}

// generic is apply.lua as embedded: every layout, every operation.
var generic = newScript(applyLua)

// Specialized scripts. For a set of limits without logs, the store runs
// apply.lua with its fast path (the block between "-- FAST BEGIN" and
// "-- FAST END") replaced by the same steps written out for those limits:
// their numbers are literals, each limit's state lives in locals of its own
// and the branches on the algorithm are taken here. That halves the work
// the script does per limit (struct.unpack of the parameters, the table
// that carries states between the check and the change), which is most of
// the server's time per decision beyond its three commands (BENCHMARKS.md).
// The general path, which runs when the fast one does not apply, is
// unchanged but for its parameters, written into the script (which is then
// run without ARGV[6]): a specialized script decides exactly as the
// generic one, as the storetest suite and the differential test against
// memstore check for both.
//
// Each distinct set of limits (their numbers, the store's margin) is one
// more script in the server's script cache, 12 to 18 KB of text without
// comments and indentation: a Store makes at most maxScripts of them, and
// runs the generic script for other sets. Stores with equal limits and
// margin, in any process, make the same script.

// maxScripts is the default bound on the specialized scripts of a Store.
const maxScripts = 64

// maxFastLimits is the most limits a specialized script handles. Each
// limit takes 7 locals and a few registers more for its expressions, and a
// Lua function has 250 registers: 18 limits no longer compile ("function
// or expression too complex"); 8 leave room.
const maxFastLimits = 8

// fastMarks are the lines around the fast path in apply.lua.
const fastBegin, fastEnd = "-- FAST BEGIN\n", "-- FAST END\n"

// paramsLine is the line of apply.lua that reads the general path's
// parameters; a specialized script has them written in its text instead.
const paramsLine = "local P = ARGV[6] -- PARAMS\n"

// specialize returns the script for limits (valid), whose parameters (ARGV[6])
// are params with the TTL margin marginMS, or nil when the generic script is
// as fast: some limit has a log, or there are too many. The script is run
// without ARGV[6].
func specialize(ps []engine.Limit, params string, marginMS int64) *script {
	if len(ps) == 0 || len(ps) > maxFastLimits {
		return nil
	}
	for _, p := range ps {
		if p.Algorithm.Logs() {
			return nil
		}
	}
	a := strings.Index(applyLua, fastBegin)
	b := strings.Index(applyLua, fastEnd)
	var sb strings.Builder
	sb.Grow(len(applyLua))
	sb.WriteString(stripComments(applyLua[:a]))
	writeFast(&sb, ps, marginMS)
	rest := stripComments(applyLua[b+len(fastEnd):])
	p := strings.Index(rest, paramsLine)
	if p < 0 {
		panic("redisstore: apply.lua has no line " + strconv.Quote(paramsLine))
	}
	sb.WriteString(rest[:p])
	sb.WriteString("local P = '")
	for i := 0; i < len(params); i++ { // every byte as a decimal escape
		sb.WriteByte('\\')
		sb.WriteByte('0' + params[i]/100)
		sb.WriteByte('0' + params[i]/10%10)
		sb.WriteByte('0' + params[i]%10)
	}
	sb.WriteString("'\n")
	sb.WriteString(rest[p+len(paramsLine):])
	return newScript(sb.String())
}

// stripComments drops the lines of s that hold only a comment, and every
// line's indentation: the server keeps every script's text, and half of
// apply.lua's is comments. (apply.lua has no long strings, whose lines this
// would change.)
func stripComments(s string) string {
	var b strings.Builder
	b.Grow(len(s) / 2)
	for line := range strings.SplitAfterSeq(s, "\n") {
		t := strings.TrimLeft(line, " \t")
		if s := strings.TrimSpace(t); s == "" || strings.HasPrefix(s, "--") {
			continue
		}
		b.WriteString(t)
	}
	return b.String()
}

// Per-limit steps of the fast path, as in apply.lua's generic fast path,
// with @A@, @B@, @C@ (the state), @t@ (now in ticks) and @e@ (SlidingWindow's
// ticks into the window; GCRA's and LeakyBucket's debt less Q) naming the
// limit's locals, and {name} its numbers, or for a rated limit on a coarse
// tick an expression of them and of its local rc (see replacer). check
// brings the state to now and ands the limit's verdict into ok; change adds
// d (0 unless the op is an admitted Take) and sets reset, the µs until fully
// replenished.
var (
	checks = map[engine.Algorithm]string{
		engine.FixedWindow: `
if not blob then @A@, @B@, @C@ = fdiv(now, {p}), 0, 0 end
if now >= (@A@ + 1) * {p} then @A@, @B@ = fdiv(now, {p}), 0 end
ok = ok and @B@ + cost <= {q}
`,
		engine.SlidingWindow: `
if not blob then @A@, @B@, @C@ = fdiv(@t@, {pt}), 0, 0 end
do
	local start = @A@ * {pt}
	if @t@ < start then
		@e@ = 0
	elseif @t@ < start + {pt} then
		@e@ = @t@ - start
	elseif @t@ < start + {pt2} then
		@A@, @B@, @C@ = @A@ + 1, @C@, 0
		@e@ = @t@ - start - {pt}
	else
		@A@, @B@, @C@ = fdiv(@t@, {pt}), 0, 0
		@e@ = @t@ - @A@ * {pt}
	end
end
ok = ok and @B@ * ({pt} - @e@) + @C@ * {pt} + cost * {pt} <= {qpt}
`,
		engine.TokenBucket: `
if not blob then @A@, @B@, @C@ = {full}, @t@, 0 end
@A@ = min(@A@, {full})
if @t@ > @B@ then
	@A@ = @A@ + {q}
	local x = (@t@ - @B@ - 1) * {q}
	if x >= {full} - @A@ then @A@ = {full} else @A@ = @A@ + x end
	@B@ = @t@
end
ok = ok and @A@ >= cost * {pt}
`,
		engine.GCRA: `
if not blob then @A@, @B@, @C@ = @t@, 0, 0 end
if @B@ >= {q} then @B@ = {q} - 1 end
if @A@ < @t@ then @A@, @B@ = @t@, 0 end
do
	local dt = @A@ - @t@ - 1
	if dt < 0 then
		@e@ = @B@ - {q}
		if @e@ > {lim} then @e@ = {lim} end
	elseif dt > {limq} then
		@e@ = {lim}
	else
		local x = dt * {q}
		if @B@ > {lim} - x then @e@ = {lim} else @e@ = x + @B@ end
	end
end
ok = ok and @e@ + (cost - {cap}) * {pt} <= {negq}
`,
	}
	changes = map[engine.Algorithm]string{
		engine.FixedWindow: `
if d ~= 0 then @B@ = min(@B@ + min(d, {m}), {m}) end
if @B@ ~= 0 then reset = (@A@ + 1) * {p} - now end
`,
		engine.SlidingWindow: `
if d ~= 0 then @C@ = min(@C@ + min(d, {m}), {m}) end
if @C@ > 0 then
	reset = (@A@ + 2) * {p} - now
elseif @B@ > 0 then
	reset = (@A@ + 1) * {p} - now
end
`,
		engine.TokenBucket: `
if d ~= 0 then @A@ = max(min(@A@, {fullr}) - min(d, {m}) * {pt}, {floorr}) end
if @A@ < {full} then reset = @B@ * {tick} - now + (cdiv({full} - (@A@ + {q}), {q}) + 1) * {tick} end
`,
		engine.GCRA: `
if d ~= 0 and @e@ < {lim} then
	@e@ = min(max(@e@, {rcq}) + min(d, {m}) * {pt}, {lim})
	local k = fdiv(@e@, {q})
	@A@, @B@ = @t@ + 1 + k, @e@ - k * {q}
end
if @e@ > {negq} then reset = (@t@ + 1) * {tick} - now + cdiv(@e@, {q}) * {tick} end
`,
	}
)

// writeFast writes the fast path for limits of parameters ps (no logs):
// the same results as the generic one in apply.lua (fast, all, keep, recs,
// fmargin), which the code after it replies with and writes.
func writeFast(b *strings.Builder, ps []engine.Limit, marginMS int64) {
	n := len(ps)
	locals := func(i int) []string {
		s := strconv.Itoa(i + 1)
		return []string{"A" + s, "B" + s, "C" + s, "t" + s, "e" + s, "r" + s}
	}
	// Per limit i: its locals, its record's format, the unpacked record
	// (h, l: the identity's halves), the test of its identity, and the
	// values packed back.
	var vars, ids, hl, idents, rec, recArgs []string
	for i, p := range ps {
		s, l := strconv.Itoa(i+1), locals(i)
		hi, lo := strconv.FormatUint(p.Ident>>32, 10), strconv.FormatUint(p.Ident&0xffffffff, 10)
		vars = append(vars, l[:5]...)
		ids = append(ids, "h"+s, "l"+s)
		hl = append(hl, "h"+s, "l"+s, l[0], l[1], l[2])
		idents = append(idents, "h"+s+" == "+hi, "l"+s+" == "+lo)
		rec = append(rec, "I4I4ddd")
		recArgs = append(recArgs, hi, lo, l[0], l[1], l[2])
	}
	w := func(s ...string) {
		for _, x := range s {
			b.WriteString(x)
		}
	}
	w("if kind <= PEEK and (not blob or #blob == ", strconv.Itoa(32*n), ") then\n")
	w("local ", strings.Join(vars, ", "), "\n")
	w("local ", strings.Join(ids, ", "), "\n")
	w("if blob then ", strings.Join(hl, ", "), " = unpack('<", strings.Join(rec, ""), "', blob) end\n")
	w("if not blob or (", strings.Join(idents, " and "), ") then\n")
	w("local ok = true\n")
	for i, p := range ps {
		l := locals(i)
		r := replacer(p, l)
		w("ok = ok and cost <= ", strconv.FormatInt(p.Capacity, 10), "\n")
		if p.Tick == 1 {
			w(l[3], " = now\n")
		} else {
			w(l[3], " = fdiv(now, ", strconv.FormatInt(p.Tick, 10), ")\n")
		}
		w(l[4], " = 0\n")
		if p.Tick != 1 && algo(p.Algorithm) != engine.SlidingWindow {
			// rc, the refill since tick t rounded up, as core's shape.since.
			qh, ql := p.Quota/p.Tick, p.Quota%p.Tick
			w("local ", l[5], " = now - ", l[3], " * ", strconv.FormatInt(p.Tick, 10), "\n")
			w(l[5], " = ", l[5], " * ", strconv.FormatInt(qh, 10))
			if ql != 0 {
				w(" + cdiv(", l[5], " * ", strconv.FormatInt(ql, 10), ", ", strconv.FormatInt(p.Tick, 10), ")")
			}
			w("\n")
		}
		w(r.Replace(checks[algo(p.Algorithm)]))
	}
	w("local d, reset = 0, 0\n")
	w("if ok and kind == TAKE then d = cost end\n")
	for i, p := range ps {
		r := replacer(p, locals(i))
		w("reset = 0\n", r.Replace(changes[algo(p.Algorithm)]), "if reset > keep then keep = reset end\n")
	}
	w("recs = pack('<", strings.Join(rec, ""), "', ", strings.Join(recArgs, ", "), ")\n")
	w("fast, all, fmargin = true, ok, ", strconv.FormatInt(marginMS, 10), "\n")
	w("end\nend\n")
}

// algo maps LeakyBucket to GCRA, whose steps it shares in the fast path
// (its delay is computed by engine.Step in the client).
func algo(a engine.Algorithm) engine.Algorithm {
	if a == engine.LeakyBucket {
		return engine.GCRA
	}
	return a
}

// replacer names limit p's locals l and writes its numbers, each an
// integer of magnitude at most 2^53 (core's bound), so exact in Lua. The
// rated algorithms' numbers that depend on rc (l[5], the refill since the
// tick boundary; 0 on a 1µs tick) are literals on a 1µs tick, else
// expressions that keep every value below 2^53 as apply.lua does: {fullr}
// = full − rc, {floorr} = full − m·P − rc (the saturated tokens), {lim} =
// m·P + rc − Q (the most debt, less Q), {limq} = ⌊{lim}/Q⌋, {rcq} = rc − Q.
func replacer(p engine.Limit, l []string) *strings.Replacer {
	m := engine.DebtFactor * p.Capacity
	mp := m * p.PeriodTicks
	full := p.Capacity * p.PeriodTicks
	num := func(v int64) string { return strconv.FormatInt(v, 10) }
	fullr, floorr, lim, limq, rcq := num(full), num(full-mp), num(mp-p.Quota), num(floorDiv(mp-p.Quota, p.Quota)), num(-p.Quota)
	if p.Tick != 1 {
		rc := l[5]
		fullr = "(" + num(full) + " - " + rc + ")"
		floorr = "(" + num(full-mp) + " - " + rc + ")"
		lim = "(" + num(mp-p.Quota) + " + " + rc + ")"
		limq = "fdiv(" + lim + ", " + num(p.Quota) + ")"
		rcq = "(" + rc + " - " + num(p.Quota) + ")"
	}
	return strings.NewReplacer(
		"@A@", l[0], "@B@", l[1], "@C@", l[2], "@t@", l[3], "@e@", l[4],
		"{p}", num(p.Period), "{q}", num(p.Quota), "{cap}", num(p.Capacity),
		"{pt}", num(p.PeriodTicks), "{pt2}", num(2*p.PeriodTicks), "{tick}", num(p.Tick),
		"{qpt}", num(p.Quota*p.PeriodTicks), "{full}", num(full), "{m}", num(m),
		"{fullr}", fullr, "{floorr}", floorr, "{lim}", lim, "{limq}", limq, "{rcq}", rcq,
		"{negq}", num(-p.Quota),
	)
}

// floorDiv returns ⌊a/b⌋ for b > 0, as Lua's fdiv.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
