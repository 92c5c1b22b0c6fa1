package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// boundCalls returns the calls of ops on s, bound to ctx as a batcher
// binds them, the specialized scripts taken as loaded (command).
func boundCalls(s *Store, ctx context.Context, ops ...engine.Op) []*call {
	cs := make([]*call, len(ops))
	for i := range ops {
		s.command(&ops[i])
		cs[i] = s.newCall(&ops[i])
		cs[i].bind(ctx)
	}
	return cs
}

// decoded returns the Results of calls from their replies res, or the
// errors.
func decoded(calls []*call, res []result) ([]engine.Result, []error) {
	rs, errs := make([]engine.Result, len(calls)), make([]error, len(calls))
	for i, c := range calls {
		if errs[i] = res[i].err; errs[i] == nil {
			rs[i], errs[i] = decode(&c.op, c.leased, res[i].v)
		}
	}
	return rs, errs
}

// A batch of several calls of one script goes as one command, whose
// replies are each call's: a key asked twice in the batch sees its first
// call's change, in the batch's order.
func TestMultiSendsABatchAsOneCommand(t *testing.T) {
	c := newClient(t)
	counts := &commandCounts{}
	c.AddHook(counts)
	s := newStore(t, c)
	plan := planOf("", core.PerMinute(10).WithAlgorithm(core.GCRA)) // a unit back every 6 s: none within the test
	ctx := context.Background()
	ops := []engine.Op{
		{Plan: plan, Kind: engine.Take, Key: "a", Cost: 1},
		{Plan: plan, Kind: engine.Take, Key: "b", Cost: 2},
		{Plan: plan, Kind: engine.Take, Key: "a", Cost: 3},
		{Plan: plan, Kind: engine.Peek, Key: "b", Cost: 0},
		{Plan: plan, Kind: engine.Take, Key: "c", Cost: 11},
	}
	for round := range 2 { // the first may load the twin (NOSCRIPT, then EVAL)
		before := counts.get("evalsha") + counts.get("eval")
		calls := boundCalls(s, ctx, ops...)
		rs, errs := decoded(calls, s.exec(ctx, c, "", calls, false))
		if sent := counts.get("evalsha") + counts.get("eval") - before; round == 1 && sent != 1 {
			t.Errorf("round %d: %d script commands for a batch of %d calls, want 1", round, sent, len(calls))
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: call %d: %v", round, i, err)
			}
		}
		want := []struct {
			allowed   bool
			remaining int64
		}{{true, 9}, {true, 8}, {true, 6}, {true, 8}, {false, 10}}
		if round == 1 {
			want = []struct {
				allowed   bool
				remaining int64
			}{{true, 5}, {true, 6}, {true, 2}, {true, 6}, {false, 10}}
		}
		for i, w := range want {
			if rs[i].Allowed != w.allowed || rs[i].Remaining != w.remaining {
				t.Errorf("round %d: call %d (%s %q cost %d): allowed %v remaining %d, want %v %d",
					round, i, ops[i].Kind, ops[i].Key, ops[i].Cost, rs[i].Allowed, rs[i].Remaining, w.allowed, w.remaining)
			}
		}
	}
}

// An operation of a batch whose script fails (here its key holds a list:
// WRONGTYPE) gets that error, as its own command would, and changes
// nothing; the others of the batch are decided as if it were not there.
func TestMultiKeepsAFailureToItsOperation(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	plan := planOf("", core.PerMinute(10).WithAlgorithm(core.GCRA))
	ctx := context.Background()
	wrong := s.stateKey("", "wrong")
	if err := c.RPush(ctx, wrong, "x").Err(); err != nil {
		t.Fatal(err)
	}
	ops := []engine.Op{
		{Plan: plan, Kind: engine.Take, Key: "a", Cost: 1},
		{Plan: plan, Kind: engine.Take, Key: "wrong", Cost: 1},
		{Plan: plan, Kind: engine.Take, Key: "a", Cost: 2},
	}
	for round := range 2 {
		calls := boundCalls(s, ctx, ops...)
		res := s.exec(ctx, c, "", calls, false)
		rs, errs := decoded(calls, res)
		if errs[0] != nil || errs[2] != nil {
			t.Fatalf("round %d: the others failed: %v, %v", round, errs[0], errs[2])
		}
		if !redis.HasErrorPrefix(res[1].err, "WRONGTYPE") {
			t.Errorf("round %d: the call on a list: %v, want WRONGTYPE", round, res[1].err)
		}
		if want := int64(10 - 3*round - 1); rs[0].Remaining != want || rs[2].Remaining != want-2 {
			t.Errorf("round %d: remaining %d then %d, want %d then %d", round, rs[0].Remaining, rs[2].Remaining, want, want-2)
		}
	}
	if n, err := c.LLen(ctx, wrong).Result(); err != nil || n != 1 {
		t.Errorf("the list: length %d (%v), want 1, untouched", n, err)
	}
}

// A twin the server lost (SCRIPT FLUSH) is loaded again with EVAL, and
// each operation of the batch applies once: the EVALSHA that NOSCRIPT
// refused ran none of them.
func TestMultiReloadsALostTwinAndAppliesOnce(t *testing.T) {
	c := newClient(t)
	counts := &commandCounts{}
	c.AddHook(counts)
	s := newStore(t, c)
	plan := planOf("", core.PerMinute(100).WithAlgorithm(core.GCRA))
	ctx := context.Background()
	for round := range 3 {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		evals := counts.get("eval")
		var ops []engine.Op
		for i := range 6 {
			ops = append(ops, engine.Op{Plan: plan, Kind: engine.Take, Key: fmt.Sprint("k", i%3), Cost: 1})
		}
		calls := boundCalls(s, ctx, ops...)
		rs, errs := decoded(calls, s.exec(ctx, c, "", calls, false))
		for i := range calls {
			if errs[i] != nil {
				t.Fatalf("round %d: call %d: %v", round, i, errs[i])
			}
			if want := int64(100 - 2*round - 1 - i/3); rs[i].Remaining != want {
				t.Errorf("round %d: call %d on %s: remaining %d, want %d", round, i, ops[i].Key, rs[i].Remaining, want)
			}
		}
		if n := counts.get("eval") - evals; n != 1 {
			t.Errorf("round %d: %d EVALs after a SCRIPT FLUSH, want 1 (the twin's)", round, n)
		}
	}
}

// Random batches of every kind of operation over plans of every script
// (specialized, generic for a log, several limits), on a fixed clock,
// decide as the same operations sent one command each in the order the
// batch ran them (its groups first: calls of different limits in one batch
// are concurrent, and any order is theirs), field by field, and leave the
// same states. Operations of one command have different numbers of KEYS
// and ARGV (refunds with a receipt or without; with operation records, a
// Peek has none), which the twin passes to each in tables it reuses.
func TestMultiDecidesAsOneCommandEach(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testMultiDecidesAsOneCommandEach(t) })
	t.Run("records", func(t *testing.T) { testMultiDecidesAsOneCommandEach(t, WithOpTTL(time.Minute)) })
}

func testMultiDecidesAsOneCommandEach(t *testing.T, opts ...Option) {
	c := newClient(t)
	batched, alone := newStore(t, c, opts...), newStore(t, c, opts...)
	plans := []*engine.Plan{
		planOf("", core.PerSecond(5)),
		planOf("", core.PerSecond(4).WithAlgorithm(core.GCRA), core.PerMinute(9).WithAlgorithm(core.TokenBucket)),
		planOf("", core.PerSecond(3).WithAlgorithm(core.SlidingLog)),
		planOf("", core.PerSecond(6).WithAlgorithm(core.FixedWindow)),
		planOf("", core.PerSecond(2).WithAlgorithm(core.LeakyBucket)),
	}
	kinds := []engine.Kind{engine.Take, engine.Take, engine.Take, engine.Peek, engine.Charge, engine.Refund, engine.Reset}
	keys := []string{"x", "y", "z"}
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	now := time.Now().UnixMicro()
	type charged struct {
		key  string
		plan *engine.Plan
	}
	receipts := map[charged]engine.Receipt{}
	refunds := 0
	for batch := range 60 {
		now += rng.Int64N(400_000)
		var ops []engine.Op
		for range 1 + rng.IntN(12) {
			op := engine.Op{Plan: plans[rng.IntN(len(plans))], Kind: kinds[rng.IntN(len(kinds))],
				Key: keys[rng.IntN(len(keys))], Cost: rng.Int64N(4), Now: now}
			if rc, ok := receipts[charged{op.Key, op.Plan}]; ok && op.Kind == engine.Refund && rng.IntN(2) == 0 {
				op.Receipt, op.Cost = &rc, rc.Cost
				refunds++
			}
			ops = append(ops, op)
		}
		bc := boundCalls(batched, ctx, ops...)
		brs, berrs := decoded(bc, batched.exec(ctx, c, "", bc, false))
		for i, op := range ops {
			if op.Kind == engine.Take && op.Cost > 0 && berrs[i] == nil && brs[i].Allowed {
				receipts[charged{op.Key, op.Plan}] = engine.ReceiptOf(&brs[i], op.Cost)
			}
		}
		// exec sends the groups first, then the calls alone: the same
		// order, one command each.
		ms, at := batched.multiOf(c, bc)
		var order []int
		for _, m := range ms {
			order = append(order, m.calls...)
		}
		for i := range ops {
			if at == nil || at[i].m == nil {
				order = append(order, i)
			}
		}
		for _, i := range order {
			ac := boundCalls(alone, ctx, ops[i])
			ars, aerrs := decoded(ac, alone.exec(ctx, c, "", ac, false))
			if (berrs[i] == nil) != (aerrs[0] == nil) || fmt.Sprintf("%+v", brs[i]) != fmt.Sprintf("%+v", ars[0]) {
				t.Fatalf("batch %d, op %d (%s %q cost %d on %v): batched %+v (%v), alone %+v (%v)",
					batch, i, ops[i].Kind, ops[i].Key, ops[i].Cost, ops[i].Plan.Limits, brs[i], berrs[i], ars[0], aerrs[0])
			}
		}
	}
	for _, k := range keys {
		b, _ := c.Get(ctx, batched.stateKey("", k)).Result()
		a, _ := c.Get(ctx, alone.stateKey("", k)).Result()
		if a != b {
			t.Errorf("key %q: state %x batched, %x alone", k, b, a)
		}
	}
	if refunds < 10 {
		t.Errorf("%d refunds with a receipt, want at least 10", refunds)
	}
}

// Each operation of a twin gets its own KEYS and ARGV, however many the
// one before it had (the twin reuses two tables for them): a refund
// without a receipt that follows one with a receipt is not given that
// receipt, and a Peek, which has no operation record, no record key.
func TestMultiGivesEachOperationItsOwnArguments(t *testing.T) {
	c := newClient(t)
	batched, alone := newStore(t, c, WithOpTTL(time.Minute)), newStore(t, c, WithOpTTL(time.Minute))
	ctx := context.Background()
	now := time.Now().UnixMicro()
	for _, plan := range []*engine.Plan{
		planOf("", core.PerMinute(10).WithAlgorithm(core.GCRA)),       // specialized
		planOf("", core.PerMinute(10).WithAlgorithm(core.SlidingLog)), // generic, a log key
	} {
		key := func(k string) string { return plan.Limits[0].Algorithm.String() + k }
		var rc engine.Receipt
		for _, s := range []*Store{batched, alone} {
			r, err := s.Apply(ctx, engine.Op{Plan: plan, Kind: engine.Take, Key: key("a"), Cost: 4, Now: now - 20_000_000})
			if err != nil || !r.Allowed {
				t.Fatalf("Take: %+v, %v", r, err)
			}
			rc = engine.ReceiptOf(&r, 4)
			if _, err := s.Apply(ctx, engine.Op{Plan: plan, Kind: engine.Take, Key: key("b"), Cost: 1, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		ops := []engine.Op{
			{Plan: plan, Kind: engine.Refund, Key: key("a"), Cost: 4, Receipt: &rc, Now: now},
			{Plan: plan, Kind: engine.Refund, Key: key("b"), Cost: 1, Now: now},
			{Plan: plan, Kind: engine.Take, Key: key("b"), Cost: 2, Now: now},
			{Plan: plan, Kind: engine.Peek, Key: key("b"), Now: now},
			{Plan: plan, Kind: engine.Take, Key: key("a"), Cost: 1, Now: now},
		}
		bc := boundCalls(batched, ctx, ops...)
		if ms, _ := batched.multiOf(c, bc); len(ms) != 1 || len(ms[0].calls) != len(ops) {
			t.Fatalf("%v: the operations are not one twin", plan.Limits)
		}
		brs, berrs := decoded(bc, batched.exec(ctx, c, "", bc, false))
		for i := range ops {
			ac := boundCalls(alone, ctx, ops[i])
			ars, aerrs := decoded(ac, alone.exec(ctx, c, "", ac, false))
			if berrs[i] != nil || aerrs[0] != nil || fmt.Sprintf("%+v", brs[i]) != fmt.Sprintf("%+v", ars[0]) {
				t.Errorf("%v: op %d (%s %q cost %d): batched %+v (%v), alone %+v (%v)",
					plan.Limits, i, ops[i].Kind, ops[i].Key, ops[i].Cost, brs[i], berrs[i], ars[0], aerrs[0])
			}
		}
	}
}

// The calls of a batch are grouped by script, at most maxMulti a group; a
// script's only call goes alone, and a client that may not hold every key
// (a Ring, a Cluster's) gets no group.
func TestMultiGroupsByScript(t *testing.T) {
	one, two := specialized(core.PerSecond(1)), specialized(core.PerSecond(2))
	mk := func(sc ...*script) []*call {
		var cs []*call
		for _, x := range sc {
			cs = append(cs, &call{script: x, keys: []string{"k"}, args: []any{"a"}})
		}
		return cs
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	s := &Store{lanes: &lanes{}}
	// describe gives each call's group and place in it, "-" for alone.
	describe := func(calls []*call) string {
		ms, at := s.multiOf(rdb, calls)
		var places []string
		for i := range calls {
			if at == nil || at[i].m == nil {
				places = append(places, "-")
				continue
			}
			places = append(places, fmt.Sprintf("%d.%d", slices.Index(ms, at[i].m), at[i].k))
		}
		return strings.Join(places, " ")
	}
	for _, tc := range []struct {
		calls []*call
		want  string
	}{
		{mk(one), "-"},
		{mk(one, two), "- -"},
		{mk(one, two, one, one, generic), "0.0 - 0.1 0.2 -"},
		{mk(one, two, two, one), "0.0 1.0 1.1 0.1"},
	} {
		if got := describe(tc.calls); got != tc.want {
			t.Errorf("groups %q, want %q", got, tc.want)
		}
	}
	var many []*script
	for range 2*maxMulti + 1 {
		many = append(many, one)
	}
	ms, _ := s.multiOf(rdb, mk(many...))
	if len(ms) != 3 || len(ms[0].calls) != maxMulti || len(ms[1].calls) != maxMulti || len(ms[2].calls) != 1 {
		t.Errorf("%d calls of one script: %d groups", len(many), len(ms))
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	if ms, _ := s.multiOf(ring, mk(one, one)); ms != nil {
		t.Errorf("a Ring's batch grouped: %d groups", len(ms))
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cluster.Close()
	if ms, _ := (&Store{lanes: &lanes{cluster: cluster}}).multiOf(rdb, mk(one, one)); ms != nil {
		t.Errorf("a Cluster's batch grouped: %d groups", len(ms))
	}
}

// Every script the template renders has its clock on one line that its
// twin replaces, and above it only definitions, which the twin makes once
// for all its operations.
func TestTwinOfEveryScript(t *testing.T) {
	for _, sc := range []*script{generic, specialized(core.PerSecond(1), core.PerMinute(2).WithAlgorithm(core.TokenBucket))} {
		prelude, _, _ := strings.Cut(sc.src, multiTime)
		for _, use := range []string{"KEYS", "ARGV", "redis.", "clock"} {
			if strings.Contains(stripComments(prelude), use) {
				t.Errorf("script %s: %q above its clock, which its twin runs once for all operations", sc.sha, use)
			}
		}
		tw := sc.twin()
		if strings.Contains(tw.src, multiTime) || strings.Count(tw.src, "redis.call('TIME')") != 1 || tw != sc.twin() {
			t.Errorf("twin of %s: the clock not replaced once, or a second twin", sc.sha)
		}
	}
}

// specialized returns the specialized script of limits.
func specialized(limits ...core.Limit) *script {
	ls := planOf("", limits...).Limits
	params, _ := formatParams(ls, 0)
	return specialize(ls, params, 0)
}

// A batch decides at one server time, read when it runs, which every
// reply carries; a call whose caller's deadline has passed by then is
// refused (ErrExpired) and changes nothing, and the others apply.
func TestMultiDecidesAtOneTimeAndHonoursEachDeadline(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	plan := planOf("", core.PerMinute(10).WithAlgorithm(core.GCRA))
	ctx := context.Background()
	warm := boundCalls(s, ctx, engine.Op{Plan: plan, Kind: engine.Peek, Key: "warm"})
	s.exec(ctx, c, "", warm, false) // the store learns the server's clock
	ops := []engine.Op{
		{Plan: plan, Kind: engine.Take, Key: "a", Cost: 1},
		{Plan: plan, Kind: engine.Take, Key: "late", Cost: 1},
		{Plan: plan, Kind: engine.Take, Key: "b", Cost: 1},
		{Plan: plan, Kind: engine.Take, Key: "late", Cost: 2},
	}
	calls := boundCalls(s, ctx, ops...)
	calls[1].deadline = time.Now().Add(-time.Second)
	calls[3].deadline = time.Now().Add(-time.Second)
	calls[2].deadline = time.Now().Add(time.Minute)
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	res := s.exec(ctx, c, "", calls, false)
	after, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var at int64
	for i, r := range res {
		v, ok := r.v.(string)
		if r.err != nil || !ok || len(v) < 8 {
			t.Fatalf("call %d: %v %q", i, r.err, v)
		}
		srv, _ := exact(v)
		if at == 0 {
			at = srv
		}
		if srv != at || srv < before.UnixMicro() || srv > after.UnixMicro() {
			t.Errorf("call %d at server µs %d; the first at %d, TIME %d before and %d after", i, srv, at, before.UnixMicro(), after.UnixMicro())
		}
	}
	_, errs := decoded(calls, res)
	for i, err := range errs {
		if late := ops[i].Key == "late"; late != errors.Is(err, ErrExpired) || !late && err != nil {
			t.Errorf("call %d on %q: %v", i, ops[i].Key, err)
		}
	}
	if n, err := c.Exists(ctx, s.stateKey("", "late")).Result(); err != nil || n != 0 {
		t.Errorf("the late calls' key exists (%v): they changed it", err)
	}
}

// Behind something that spreads keys over several servers (here a client
// of one master of a Cluster, which refuses keys of several slots with
// CROSSSLOT, as such proxies do), a twin is refused unrun: its operations
// are sent again one command each and apply once, and the store sends
// every batch so from then on. WithCombinedScripts(false) does from the
// start.
func TestMultiBehindAProxyOfSeveralSlots(t *testing.T) {
	node := firstMaster(t)
	counts := &commandCounts{}
	node.AddHook(counts)
	s := newStore(t, node)
	ctx := context.Background()
	ops := takesOnMaster(t, node, s, 4, 2)
	for round := range 2 {
		before := counts.get("evalsha") + counts.get("eval")
		calls := boundCalls(s, ctx, ops...)
		rs, errs := decoded(calls, s.exec(ctx, node, "", calls, false))
		for i := range calls {
			if errs[i] != nil || rs[i].Remaining != int64(8-2*round) {
				t.Fatalf("round %d: call %d: remaining %d (%v), want %d", round, i, rs[i].Remaining, errs[i], 8-2*round)
			}
		}
		if !s.separate.Load() {
			t.Fatalf("round %d: twins still on after CROSSSLOT", round)
		}
		if sent := counts.get("evalsha") + counts.get("eval") - before; round == 1 && sent != len(ops) {
			t.Errorf("round %d: %d script commands, want one per call", round, sent)
		}
	}

	c := newClient(t)
	counts = &commandCounts{}
	c.AddHook(counts)
	s = newStore(t, c, WithCombinedScripts(false))
	calls := boundCalls(s, ctx, ops...)
	if _, errs := decoded(calls, s.exec(ctx, c, "", calls, false)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if sent := counts.get("evalsha"); sent != len(ops) { // (each followed by an EVAL where the server lost the script)
		t.Errorf("WithCombinedScripts(false): %d EVALSHAs for %d calls, want one per call", sent, len(ops))
	}
}

// An operation of a twin that fails with an error go-redis types (OOM
// here, from a server out of memory) gets it alone, and the replies after
// it in the pipeline (a call sent alone, of another plan) stay theirs:
// go-redis stops reading an array at such an error element, so the twin
// never replies with one. A node that refuses every write (READONLY, a
// replica) fails the whole twin with that error, unrun, as go-redis drops
// a connection that says so only when it reads it itself.
func TestMultiKeepsTypedErrorsInPlace(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	s := newStore(t, c)
	gcra := planOf("", core.PerMinute(20).WithAlgorithm(core.GCRA))
	other := planOf("", core.PerMinute(20))
	ctx := context.Background()
	ops := []engine.Op{
		{Plan: gcra, Kind: engine.Take, Key: "a", Cost: 3},
		{Plan: gcra, Kind: engine.Peek, Key: "b"},
		{Plan: gcra, Kind: engine.Peek, Key: "c"},
		{Plan: other, Kind: engine.Peek, Key: "d"},
	}
	calls := boundCalls(s, ctx, ops[0], ops[1]) // b exists, with 8 units taken
	calls[1].op.Kind, calls[1].argv.kind, calls[1].op.Cost, calls[1].argv.cost = engine.Take, int64(engine.Take), 8, 8
	if _, errs := decoded(calls, s.exec(ctx, c, "", calls, false)); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	calls = boundCalls(s, ctx, ops...)
	res := s.exec(ctx, c, "", calls, false)
	rs, errs := decoded(calls, res)
	if !redis.HasErrorPrefix(errs[0], "OOM") {
		t.Errorf("the Take on a full server: %v, want OOM", errs[0])
	}
	for i, want := range []int64{-1, 20 - 8, 20, 20} {
		if i > 0 && (errs[i] != nil || rs[i].Remaining != want) {
			t.Errorf("call %d (%s %q): remaining %d (%v), want %d", i, ops[i].Kind, ops[i].Key, rs[i].Remaining, errs[i], want)
		}
	}
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}

	// A replica (of a master that is not there) refuses every write.
	if err := c.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	calls = boundCalls(s, ctx, ops[1], ops[0], ops[2])
	res = s.exec(ctx, c, "", calls, false)
	for i, r := range res {
		if !redis.HasErrorPrefix(r.err, "READONLY") {
			t.Errorf("call %d on a replica: %v %q, want READONLY for the whole twin", i, r.err, r.v)
		}
	}
}

// noScriptFirst answers NOSCRIPT, unrun, for the twins a node of a Cluster
// refused with CROSSSLOT, as a proxy that looks for the script before the
// keys would.
type noScriptFirst struct{ n atomic.Int64 }

func (h *noScriptFirst) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *noScriptFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *noScriptFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if cmd.Name() == "evalsha" && crossSlot(cmd.Err()) {
				cmd.SetErr(opError("NOSCRIPT No matching script. Please use EVAL."))
				h.n.Add(1)
			}
		}
		return err
	}
}

// Behind such a proxy, the EVAL that loads a lost twin is refused for its
// slots: its operations go again alone, and the store sends every batch
// so from then on.
func TestMultiBehindAProxyThatLooksForTheScriptFirst(t *testing.T) {
	node := firstMaster(t)
	first := &noScriptFirst{}
	node.AddHook(first)
	s := newStore(t, node)
	ctx := context.Background()
	ops := takesOnMaster(t, node, s, 3, 3)
	calls := boundCalls(s, ctx, ops...)
	rs, errs := decoded(calls, s.exec(ctx, node, "", calls, false))
	for i := range calls {
		if errs[i] != nil || rs[i].Remaining != 7 {
			t.Errorf("call %d: remaining %d (%v), want 7", i, rs[i].Remaining, errs[i])
		}
	}
	if first.n.Load() != 1 || !s.separate.Load() {
		t.Errorf("%d twins answered NOSCRIPT first; twins on: %v", first.n.Load(), !s.separate.Load())
	}
}

// firstMaster returns a client of the first master of the Cluster, alone
// (a *redis.Client, not a Cluster's): it refuses keys of several slots in
// one command with CROSSSLOT, as a proxy in front of several servers may.
func firstMaster(t *testing.T) *redis.Client {
	addr, _, _ := strings.Cut(env(t, "TOLLGATE_REDIS_CLUSTER_ADDRS"), ",")
	node := redis.NewClient(clientOptions(addr))
	t.Cleanup(func() { node.Close() })
	return node
}

// takesOnMaster returns n Takes of cost on keys of s that node serves, of
// several slots, under a limit of 10 a minute.
func takesOnMaster(t *testing.T, node *redis.Client, s *Store, n int, cost int64) []engine.Op {
	plan := planOf("", core.PerMinute(10).WithAlgorithm(core.GCRA))
	var ops []engine.Op
	for i := 0; len(ops) < n && i < 1000; i++ {
		key := fmt.Sprint("k", i)
		if err := node.Get(context.Background(), s.stateKey("", key)).Err(); err == nil || err == redis.Nil {
			ops = append(ops, engine.Op{Plan: plan, Kind: engine.Take, Key: key, Cost: cost})
		}
	}
	if len(ops) < n {
		t.Fatalf("%d keys of master %s found, want %d", len(ops), node.Options().Addr, n)
	}
	return ops
}

// A twin's reply that is not what a twin replies (an array of another
// length, an element of another shape) is an ErrReply for the calls, never
// a panic.
func TestMultiRejectsMalformedReplies(t *testing.T) {
	for _, v := range []any{
		"not an array",
		[]any{"a"},                  // one reply for two calls
		[]any{"a", []any{}},         // an error of no message
		[]any{"a", []any{"x", "y"}}, // an error of two
		[]any{"a", []any{int64(1)}}, // an error not a string
		[]any{"a", int64(7)},        // a reply not a string
	} {
		cmd := redis.NewCmd(context.Background())
		cmd.SetVal(v)
		m := &multi{calls: []int{0, 1}, cmd: cmd}
		if _, err := m.reply(1); !errors.Is(err, ErrReply) {
			t.Errorf("reply %#v: %v, want ErrReply", v, err)
		}
	}
	cmd := redis.NewCmd(context.Background())
	cmd.SetVal([]any{"ok", []any{"OOM no room"}, nil}) // nil: a Lua false
	m := &multi{calls: []int{0, 1, 2}, cmd: cmd}
	if v, err := m.reply(0); v != "ok" || err != nil {
		t.Errorf("element 0: %v, %v", v, err)
	}
	if _, err := m.reply(1); !redis.HasErrorPrefix(err, "OOM") || notRun(err) {
		t.Errorf("element 1: %v, want a redis.Error OOM, not one refused unrun", err)
	}
	if _, err := m.reply(2); err != redis.Nil {
		t.Errorf("element 2: %v, want redis.Nil", err)
	}
}

// twinSends counts the twins a client sends: script commands of several
// operations' keys, where each operation of the tests that count them has
// one key.
type twinSends struct{ n atomic.Int64 }

func (h *twinSends) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *twinSends) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *twinSends) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if args := cmd.Args(); isScriptCmd(cmd) && len(args) > 2 {
				if keys, _ := args[2].(int); keys > 1 {
					h.n.Add(1)
				}
			}
		}
		return next(ctx, cmds)
	}
}
