package redisstore

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strings"
	"sync/atomic"
	"text/template"

	"github.com/tollgate/tollgate/core/engine"
)

// A script is a rendering of apply.lua.tmpl: its text and the SHA-1 that EVALSHA
// runs it by.
type script struct {
	src, sha string
	shaArg   any // sha, boxed once for the commands that run it (call.evalSha)
	// A specialized script: loaded on the store's nodes (SCRIPT LOAD), and
	// a load running (see useScript).
	loaded, loading atomic.Bool
	twinned         atomic.Pointer[script] // its twin, once made (multi.go)
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	return &script{src: src, sha: sha, shaArg: sha}
}

// The script's source is apply.lua.tmpl, a text/template rendered two
// ways (see its opening comment): generic, for limits of any layout, and
// specialized, for one set of limits without logs. A specialized script
// has the fast path written out for its limits: their numbers are
// literals, each limit's state lives in locals of its own and the branches
// on the algorithm are taken here. That halves the work the script does
// per limit (struct.unpack of the parameters, the table that carries
// states between the check and the change), which is most of the server's
// time per decision beyond its three commands (BENCHMARKS.md). The general
// path, which runs when the fast one does not apply, is the generic
// script's but for its parameters, written into the script (which is then
// run without ARGV[2]): a specialized script decides exactly as the
// generic one, as the storetest suite and the differential test against
// memstore check for both.
//
// Each distinct set of limits (their numbers, the store's margin) is one
// more script in the server's script cache, 15 KB (one limit) to 22 KB
// (eight) of text without comments and indentation: a Store makes at most
// maxScripts of them, and runs the generic script for other sets. Stores
// with equal limits and margin, in any process, make the same script.

//go:embed apply.lua.tmpl
var applyTemplate string

// applyTmpl is apply.lua.tmpl, parsed.
var applyTmpl = template.Must(template.New("apply.lua").Option("missingkey=error").Parse(applyTemplate))

// generic is the script for limits of any layout, every operation.
var generic = newScript(render(scriptData{}))

// maxScripts is the default bound on the specialized scripts of a Store.
const maxScripts = 64

// maxFastLimits is the most limits a specialized script handles. Each
// limit takes 7 locals and a few registers more for its expressions, and a
// Lua function has 250 registers: 18 limits no longer compile ("function
// or expression too complex"); 8 leave room.
const maxFastLimits = 8

// scriptData is what apply.lua.tmpl is rendered with: no Limits for the
// generic script.
type scriptData struct {
	Limits       []fastLimit
	RecordBytes  int    // 32 per limit: the length of the key's state
	RecordFormat string // the struct format of the key's state
	Margin       int64  // the TTL margin, ms
	Params       string // ARGV[2] as a Lua string literal's body
	ReceiptLife  int64  // how long a receipt outlives its operation's deadline, µs
}

// A fastLimit is one limit of a specialized script: the numbers its steps
// use, each an integer of magnitude at most 2^53 (core's bound), so exact
// in Lua. A wide limit (engine.Limit.Wide), whose products pass 2^53, has
// none of them: its steps count time in spans, w + f/Q µs (as the generic
// script's exact path does), and it has the spans of a unit, of its
// capacity and of its most debt instead, each computed here in 128 bits
// (engine.MulDivMod).
type fastLimit struct {
	N                   int    // position among the limits, from 1: its locals are A<N>, B<N>, …
	Alg                 string // "fixed", "sliding", "token", "gcra" (GCRA and LeakyBucket), or for a wide limit "wsliding" or "wgcra" (GCRA, LeakyBucket and TokenBucket)
	IdentHigh, IdentLow uint64 // the halves of its layout's identity
	Q, Cap, M           int64  // quota, capacity (units), m = DebtFactor·Cap
	P, PT, PT2          int64  // period in µs, again (PT, as the generic script names it), and twice
	// Narrow limits only.
	QPT, Full, NegQ int64 // Q·P, Cap·P, −Q
	Floor           int64 // Full − m·P: the fewest tokens a charge leaves
	Lim, LimQ       int64 // m·P − Q: the most debt, less Q; ⌊Lim/Q⌋
	// Wide GCRA-like limits ("wgcra") only: spans w + f/Q µs.
	TK, TR int64 // a unit, T = P/Q: ⌊P/Q⌋ and P mod Q
	CW, CF int64 // the capacity, Cap·T
	LW, LF int64 // the most debt, m·T
}

// render renders apply.lua.tmpl with d.
func render(d scriptData) string {
	d.ReceiptLife = receiptLife.Microseconds()
	var b strings.Builder
	if err := applyTmpl.Execute(&b, d); err != nil {
		panic("redisstore: apply.lua.tmpl: " + err.Error()) // a bug of the template, which every test renders
	}
	return b.String()
}

// specialize returns the script for limits (valid), whose parameters (ARGV[2])
// are params with the TTL margin marginMS, or nil when the generic script is
// as fast: some limit has a log, or there are too many. The script is run
// without ARGV[2].
func specialize(ps []engine.Limit, params string, marginMS int64) *script {
	if len(ps) == 0 || len(ps) > maxFastLimits {
		return nil
	}
	d := scriptData{RecordBytes: 32 * len(ps), RecordFormat: strings.Repeat("I4I4ddd", len(ps)), Margin: marginMS}
	for i, p := range ps {
		if p.Algorithm.Logs() {
			return nil
		}
		d.Limits = append(d.Limits, newFastLimit(i+1, p))
	}
	var esc strings.Builder
	for i := 0; i < len(params); i++ { // every byte as a decimal escape
		esc.WriteByte('\\')
		esc.WriteByte('0' + params[i]/100)
		esc.WriteByte('0' + params[i]/10%10)
		esc.WriteByte('0' + params[i]%10)
	}
	d.Params = esc.String()
	return newScript(stripComments(render(d)))
}

// newFastLimit returns limit p, the nth of its script.
func newFastLimit(n int, p engine.Limit) fastLimit {
	m := engine.DebtFactor * p.Capacity
	l := fastLimit{N: n, Alg: "gcra", IdentHigh: p.Ident >> 32, IdentLow: p.Ident & 0xffffffff,
		Q: p.Quota, Cap: p.Capacity, M: m, P: p.Period, PT: p.Period, PT2: 2 * p.Period}
	if p.Wide {
		// Capacity × Period passes 2^47: SlidingWindow, or one of the GCRA
		// machines, a wide TokenBucket among them (engine.Limit.Wide).
		if p.Algorithm == engine.SlidingWindow {
			l.Alg = "wsliding"
			return l
		}
		l.Alg = "wgcra"
		l.TK, l.TR = p.Period/p.Quota, p.Period%p.Quota
		l.CW, l.CF = engine.MulDivMod(p.Capacity, p.Period, p.Quota)
		l.LW, l.LF = engine.MulDivMod(m, p.Period, p.Quota)
		return l
	}
	mp := m * p.Period
	l.QPT, l.Full, l.NegQ = p.Quota*p.Period, p.Capacity*p.Period, -p.Quota
	l.Floor, l.Lim, l.LimQ = l.Full-mp, mp-p.Quota, floorDiv(mp-p.Quota, p.Quota)
	switch p.Algorithm {
	case engine.FixedWindow:
		l.Alg = "fixed"
	case engine.SlidingWindow:
		l.Alg = "sliding"
	case engine.TokenBucket:
		l.Alg = "token"
	}
	return l
}

// stripComments drops the lines of s that hold only a comment or nothing,
// and every line's indentation: the server keeps every script's text, and
// half of the template's is comments. (The template has no long strings,
// whose lines this would change.)
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

// floorDiv returns ⌊a/b⌋ for b > 0, as Lua's fdiv.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
