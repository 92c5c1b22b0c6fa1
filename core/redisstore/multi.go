package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// One script call for several operations.
//
// A batch of operations pipelined as one EVALSHA each costs the server, per
// operation, a command to read, look up and reply to, a Lua call to set up
// (its KEYS and ARGV tables) and the script's TIME; and it costs the
// client a command to build, write and read. Where a batch holds several
// operations of one script, on a server that holds every key (a single
// Redis, or a Sentinel's master: not a Cluster, nor a Ring, whose client
// routes a command by its first key), the batching worker sends them as
// one EVALSHA of the script's twin instead: the same script wrapped in a
// function, which the twin calls once per operation with that operation's
// KEYS and ARGV, and whose replies it returns in an array, in order.
//
// What each operation does is the script's, unchanged, but for its clock:
// the twin reads TIME once, and every operation of the batch decides at
// that instant (the batch runs atomically, so no other command comes
// between). A caller's deadline is checked against it too: an operation
// the server runs up to the twin's time (maxMulti, below) past its
// caller's deadline is then applied and undone (compensate), as a reply
// read past the deadline always is.
//
// Each operation runs under pcall: an operation whose script fails (a key
// of the wrong type, a server out of memory at a write) gets its own error
// in its place in the array, as its own EVALSHA would have got, and the
// others are decided as if it were not there. A node that refuses every
// write (READONLY, NOREPLICAS) fails the whole twin instead (see twinOf). What a failing operation
// wrote before it failed stays, as it would have in its own EVALSHA (which
// Redis does not roll back either): the fast path writes once, at its end,
// so an operation failing there before has changed nothing.
//
// Behind a proxy that spreads keys over several servers, a twin's keys may
// not live together: WithCombinedScripts(false) turns twins off, and a
// twin refused for its keys' slots (CROSSSLOT) turns them off too, its
// operations sent again one command each.
//
// The twin of a script is made on first use. It is loaded with the
// script, by the warm-up and by the background load of a specialized
// script (warm.go), and like any script with EVAL after NOSCRIPT (exec).
// maxMulti bounds the operations of one call, and so how long the server
// runs it without serving other clients: 64 operations of one GCRA limit
// took it 0.87 ms, of a sliding log of 600 marks 2.9 ms. That is also how
// long past its caller's deadline an operation may run (see above).
const maxMulti = 32

// multiTime is the line of apply.lua.tmpl that reads the server's clock,
// which a twin replaces with the time it read once and the reply's head
// it made of it.
const multiTime = "local srv, head = stamp(redis.call('TIME'))"

// twinOf returns the text of the twin of a script of text src. src is a
// rendering of apply.lua.tmpl, which has multiTime on one line.
func twinOf(src string) string {
	if strings.Count(src, multiTime) != 1 {
		panic("redisstore: apply.lua.tmpl: want one " + multiTime) // a bug of the template, which every test renders
	}
	// What comes before the clock only defines constants and functions:
	// the twin defines them once, and each operation's call uses them.
	prelude, body, _ := strings.Cut(src, multiTime)
	// ARGV[1] of the twin is the layout: per operation, its count of KEYS
	// and of ARGV, a byte each. Its other KEYS and ARGV are the
	// operations', one after the other. A reply the script makes nil would
	// leave a hole in the array; none does, but false keeps the place.
	//
	// An operation's error goes in its place as an array of its message
	// (see opError), never as an error reply: go-redis stops reading an
	// array at an element of the errors it types (OOM, READONLY, …) and
	// fails the whole command with it, leaving the rest of the array
	// unread on the connection for the next commands to take as theirs.
	// (Redis 6 prefixes pcall's message with the script's position, which
	// the twin drops.) But READONLY and NOREPLICAS, which refuse every
	// write the node gets, fail the whole call as one error, as each
	// operation's own command would have failed: none of its operations
	// has written, and go-redis drops a connection that says READONLY (a
	// master demoted under it) only when it reads that error itself.
	//
	// Garbage is much of what the server's Lua costs beyond its commands
	// (allocating, interning and sweeping it): the time and the reply's
	// head are made once, not per operation, and every operation's KEYS
	// and ARGV are two tables the twin fills anew, not two new ones. No
	// operation keeps them past its call.
	return prelude + `local SRV, HEAD = stamp(redis.call('TIME'))
local function one(KEYS, ARGV)
local srv, head = SRV, HEAD` + body + `
end
local layout, out, k, a = ARGV[1], {}, 0, 1
local ks, as, nks, nas = {}, {}, 0, 0
for i = 1, #layout, 2 do
local nk, na = string.byte(layout, i, i + 1)
for j = 1, nk do ks[j] = KEYS[k + j] end
for j = nk + 1, nks do ks[j] = nil end
for j = 1, na do as[j] = ARGV[a + j] end
for j = na + 1, nas do as[j] = nil end
k, a, nks, nas = k + nk, a + na, nk, na
local ok, r = pcall(one, ks, as)
if not ok then
local msg = string.gsub(type(r) == 'table' and r.err or tostring(r), '^[%w_]+:%d+: ', '')
if string.sub(msg, 1, 9) == 'READONLY ' or string.sub(msg, 1, 11) == 'NOREPLICAS ' then return redis.error_reply(msg) end
r = {msg}
elseif r == nil then r = false end
out[(i + 1) / 2] = r
end
return out
`
}

// twin returns sc's twin, made on first use.
func (sc *script) twin() *script {
	if t := sc.twinned.Load(); t != nil {
		return t
	}
	sc.twinned.CompareAndSwap(nil, newScript(twinOf(sc.src)))
	return sc.twinned.Load()
}

// A multi is the one command of several calls of a batch (see above):
// calls are their indexes in the batch.
type multi struct {
	twin  *script
	calls []int
	keys  []string
	args  []any // ARGV[1], the layout, then the calls' own
	cmd   *redis.Cmd
}

// multiOf groups the calls of a batch sent with client by script, for one
// command per group (see above), and returns the groups, each of at most
// maxMulti calls, with at, for each call, its group and its place in it
// (a nil group: it goes alone, as the only call of its script). It returns
// none where client may not hold every key.
func (s *Store) multiOf(client Client, calls []*call) (ms []*multi, at []place) {
	if len(calls) < 2 || !s.combines(client) {
		return nil, nil
	}
	// The batch's scripts and their calls: few scripts, most often one.
	type tally struct {
		sc   *script
		n    int    // its calls in the batch
		done int    // those already grouped
		last *multi // the group filling up
	}
	var ts []tally
	of := func(sc *script) *tally {
		for t := range ts {
			if ts[t].sc == sc {
				return &ts[t]
			}
		}
		ts = append(ts, tally{sc: sc})
		return &ts[len(ts)-1]
	}
	for _, c := range calls {
		if fits(c) {
			of(c.script).n++
		}
	}
	for i, c := range calls {
		if !fits(c) {
			continue
		}
		t := of(c.script)
		if t.n < 2 {
			continue
		}
		if t.last == nil || len(t.last.calls) == maxMulti {
			// Sized for the calls left to it: each has one key and one
			// argument but for a few kinds (logs, records, refunds).
			k := min(t.n-t.done, maxMulti)
			t.last = &multi{twin: c.script.twin(), calls: make([]int, 0, k), keys: make([]string, 0, k), args: make([]any, 1, 1+k)}
			ms = append(ms, t.last)
			if at == nil {
				at = make([]place, len(calls))
			}
		}
		t.done++
		t.last.add(i, c, at)
	}
	for _, m := range ms {
		layout := make([]byte, 0, 2*len(m.calls))
		for _, i := range m.calls {
			layout = append(layout, byte(len(calls[i].keys)), byte(len(calls[i].args)))
		}
		m.args[0] = string(layout)
	}
	return ms, at
}

// crossSlot reports whether err is a refusal, unrun, of a command whose
// keys are in several slots: a proxy in front of several servers, which
// cannot run a twin.
func crossSlot(err error) bool { return err != nil && redis.HasErrorPrefix(err, "CROSSSLOT") }

// combines reports whether s sends twins with client (a batch's worker's,
// the warm-up's, a script load's): client holds every key (a single
// Redis, a Sentinel's master, not a Cluster's master, which is a client
// of the same type), and WithCombinedScripts, or a CROSSSLOT refusal,
// has not turned twins off.
func (s *Store) combines(client Client) bool {
	_, ok := client.(*redis.Client)
	return ok && s.lanes.cluster == nil && !s.separate.Load()
}

// fits reports whether c's KEYS and ARGV can be counted in a twin's
// layout, a byte each (no plan has so many logs that they cannot).
func fits(c *call) bool { return len(c.keys) <= 255 && len(c.args) <= 255 }

// A place is where a call's reply is: element k of its group m's reply, or
// its own command's when m is nil.
type place struct {
	m *multi
	k int
}

// add puts call c, of index i, in m.
func (m *multi) add(i int, c *call, at []place) {
	at[i] = place{m, len(m.calls)}
	m.calls = append(m.calls, i)
	m.keys = append(m.keys, c.keys...)
	m.args = append(m.args, c.args...)
}

// send adds m's EVALSHA to pipe, as the command of each of its calls
// (cmds, by their index in calls).
func (m *multi) send(ctx context.Context, pipe redis.Pipeliner, calls []*call, cmds []*redis.Cmd) {
	m.carry(pipe.Do(ctx, evalSha(m.twin, m.keys, m.args)...), calls, cmds)
}

// load adds m's EVAL to pipe, which loads its twin on a server that lost it
// (NOSCRIPT refused the EVALSHA unrun: its calls may be sent again).
func (m *multi) load(ctx context.Context, pipe redis.Pipeliner, calls []*call, cmds []*redis.Cmd) {
	for _, i := range m.calls {
		rearm(calls[i].args)
	}
	m.carry(pipe.Eval(ctx, m.twin.src, m.keys, m.args...), calls, cmds)
}

// carry makes cmd the command of m and of its calls.
func (m *multi) carry(cmd *redis.Cmd, calls []*call, cmds []*redis.Cmd) {
	m.cmd = cmd
	for _, i := range m.calls {
		cmds[i] = cmd
		calls[i].argv.once.cmd.Store(cmd)
	}
}

// reply returns the reply of the call in place k of m, as its own command's
// would be: its value, or its error, or m's error when m failed as a whole.
func (m *multi) reply(k int) (any, error) {
	v, err := m.cmd.Result()
	if err != nil {
		return nil, err
	}
	vs, ok := v.([]any)
	if !ok || len(vs) != len(m.calls) {
		return nil, fmt.Errorf("%w: %d operations, reply %T of %d", ErrReply, len(m.calls), v, len(vs))
	}
	switch r := vs[k].(type) {
	case nil:
		return nil, redis.Nil
	case string:
		return vs[k], nil // boxed already: r boxed again would be an allocation per operation
	case []any: // its error (see twinOf)
		if len(r) == 1 {
			if msg, ok := r[0].(string); ok {
				return nil, opError(msg)
			}
		}
	}
	return nil, fmt.Errorf("%w: operation %d of %d: %T", ErrReply, k, len(m.calls), vs[k])
}

// An opError is the error of one operation of a twin, its script's: a
// redis.Error, as the reply of the operation's own command would have
// been.
type opError string

func (e opError) Error() string { return string(e) }

// RedisError makes opError a redis.Error: an error Redis replied with.
func (opError) RedisError() {}
