package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/internal/ratelog"
)

// Client is the part of a go-redis client the store uses. *redis.Client,
// *redis.ClusterClient, *redis.Ring and the client of
// redis.NewFailoverClient satisfy it.
//
// The store honours a context's deadline (such as the Limiter's per-call
// timeout) itself: Apply returns by it, and a late reply is read or its
// receipt looked for (see the package doc). Set ContextTimeoutEnabled in
// the client's options: a caller with nothing else in flight then sends
// its own command (without it, go-redis would bound the read by its
// ReadTimeout, 5s by default, not by the caller's deadline, so the store
// sends no call inline: each goes to a batching worker, or to a goroutine
// of its own without batching), and the store's goroutines
// are not held by a server that hangs for longer. Set MaxRetries: -1 and
// DialerRetries: 1 so that a refused connection is seen at once.
type Client interface {
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	Pipeline() redis.Pipeliner
}

// Store is a core.Store in Redis or Redis Cluster. It is safe for
// concurrent use. Create it with New.
type Store struct {
	client    Client
	prefix    string
	maxKeyLen int
	margin    int64 // ms
	opTTL     int64 // ms; 0: no operation records
	waitN     int   // WithWait: replicas that must acknowledge a change; 0: none
	waitMS    int64 // WithWait: how long to wait for them, ms

	opBase string // random per store: operation ids are opBase + a counter
	opSeq  atomic.Uint64

	lanes *lanes // the nodes' queues (nodes.go)
	// separate: each operation is its own EVALSHA, even in a batch on a
	// *redis.Client (WithCombinedScripts, multi.go).
	separate atomic.Bool
	closed   atomic.Bool
	clock    *serverClock // the server's clock, for deadlines (deadline.go)

	// Operations undone because their callers had given up (compensate),
	// and sent again through the cluster client after a node refused them
	// unrun (nodes.go).
	undone, undoFailed, redirected atomic.Int64
	// State-changing operations decided without the replicas' WAIT
	// acknowledgement (WithWait).
	unreplicated atomic.Int64
	waitOff      sync.Map // node address → *nodeWait (batch.go)

	obs core.Observer   // nil: none (observe.go)
	log *ratelog.Logger // never nil

	// ARGV[2], the limits' parameters, formatted once per plan (see
	// prepare), with the script for them: at most maxScripts specialized
	// scripts, by their parameters. scriptMu guards scripts.
	scriptMu   sync.Mutex
	scripts    map[string]*script
	maxScripts int
	once       sync.Once
}

// Defaults of the options.
const (
	// DefaultPrefix is the default prefix of every key.
	DefaultPrefix = "tollgate:"
	// DefaultMargin is the default time a key outlives the full
	// replenishment of its limits at least (see WithMargin).
	DefaultMargin = time.Second
	// DefaultMaxKeyLen is the default length above which user keys are
	// replaced by their SHA-256.
	DefaultMaxKeyLen = 256
	// DefaultBatchSize is the default largest number of operations sent in
	// one pipeline when batching is on.
	DefaultBatchSize = 128
	// DefaultBatchWorkers is the default number of pipelines in flight at
	// once when batching is on.
	DefaultBatchWorkers = 4
)

// An Option configures a Store.
type Option func(*config)

type config struct {
	obs              core.Observer
	logger           *slog.Logger
	nilOption        string // WithObserver(nil) or WithLogger(nil), an error of New
	prefix           string
	margin, opTTL    time.Duration
	maxKeyLen        int
	batch, batchSize int
	waitN            int
	waitFor          time.Duration
	warmConns        int
	warmFor          time.Duration
	separate         bool // WithCombinedScripts(false)
}

// WithPrefix sets the prefix of every key the store writes. It must not
// contain '{' or '}' (the store puts the hash tag right after it).
// Default: DefaultPrefix.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithMargin sets how long a key outlives the full replenishment of its
// limits at least (and on Redis 7 at most twice as long: see Expiry in
// the package doc), rounded up to whole milliseconds: it covers the difference
// between the clock that computed the replenishment and the server's
// expiry clock (the same one under the default Redis TIME; the callers'
// clocks under core.WithClock, which must then be close to the server's).
// With a margin of 0 every write sets its key's TTL exactly.
// Default: DefaultMargin.
func WithMargin(d time.Duration) Option { return func(c *config) { c.margin = d } }

// WithOpTTL turns on operation records: the reply of each state-changing
// operation is kept under its operation id, so that go-redis may send a
// command again after losing its reply, and the copy returns the first
// reply instead of charging twice (see the package doc). A record lives
// until the deadline of the call's context and 200 ms more (go-redis sends
// no copy after the deadline), or d, whichever is shorter; without a
// deadline, d, which should then exceed the client's retry window (about
// MaxRetries × (ReadTimeout + MaxRetryBackoff)). Records cost the server a
// key per state-changing decision. 0, the default, turns them off: go-redis
// is then never let send a state-changing operation twice (ErrResent).
func WithOpTTL(d time.Duration) Option { return func(c *config) { c.opTTL = d } }

// WithWait makes state-changing operations durable against a failover
// while the replicas keep up: each pipeline of operations ends with WAIT
// replicas timeout (on the same connection, so in the same round trip),
// and its operations are answered once replicas replicas have
// acknowledged them, or after timeout.
//
// When fewer did, the store tells a replica that lags from one that is
// gone by how long it lasts. For a second (a replica behind, a failover
// under way) the operations they did not acknowledge fail with
// ErrNotReplicated, and the Limiter's failure policy answers; the master
// keeps the change, so a failure errs on the side of the limit (a
// decision answered as failed may still count, never the reverse). Past
// that second (a master whose only replica died, a replica promoted in a
// failover with none of its own), failing them would turn the loss of a
// replica into an outage of every key on that master: they are decided
// all the same, and reported, each pipeline's as an EventStoreFailure
// whose Err wraps ErrNotReplicated and whose Count is their number
// (observers: tollgate_store_failures_total) and a warning, at most a
// line a second, that a failover now may lose them. The node is then sent
// no WAIT for a second at a time, lest each pipeline wait the whole
// timeout for replicas that are not there; a WAIT they acknowledge ends
// it. An operation that a Cluster redirected to another node on the way
// (a slot moving) counts as not acknowledged, since WAIT covers only the
// connection it was sent on. Keep timeout well below the Limiter's
// (core.WithTimeout). Redis ends a WAIT that times out on its next cron
// tick, every 1000/hz ms (100 ms at the default hz 10), so a WAIT for a
// replica that is gone lasts that long whatever timeout says: New, when
// it warms up (WithWarmup), warns once per node whose tick is longer than
// timeout; set hz 100 there.
//
// Without it, replication is asynchronous: a master that dies takes with
// it the changes it acknowledged but had not yet sent to its replicas, and
// the replica promoted in its place admits them again (see the package
// doc). The price is a replica's acknowledgement per pipeline: see
// BENCHMARKS.md. replicas ≥ 1 and timeout > 0, or replicas = 0 (the
// default) for none.
func WithWait(replicas int, timeout time.Duration) Option {
	return func(c *config) { c.waitN, c.waitFor = replicas, timeout }
}

// WithMaxKeyLen makes user keys longer than n bytes be replaced, in Redis
// key names, by their SHA-256. Default: DefaultMaxKeyLen.
func WithMaxKeyLen(n int) Option { return func(c *config) { c.maxKeyLen = n } }

// WithBatching coalesces concurrent operations into pipelines: up to size
// operations per pipeline, workers pipelines in flight at once. An
// operation that finds another in flight on its node is sent as soon as a
// worker is free, with whatever others are waiting then (no added wait),
// so a busy store sends many operations per round trip; one that finds
// none is sent inline by its caller (see the package doc). WithBatching(0,
// 0) turns batching off: each operation is then one EVALSHA, inline or
// from a goroutine of its own; negative values, or workers without a
// positive size, are an error of New. Default: on, DefaultBatchSize and
// DefaultBatchWorkers.
func WithBatching(size, workers int) Option {
	return func(c *config) { c.batchSize, c.batch = size, workers }
}

// WithCombinedScripts sets whether, on a *redis.Client (a single Redis or
// a Sentinel's master), a batching worker sends the operations of one
// script in its pipeline as one EVALSHA, which runs them one after the
// other and replies to each (see Batching in the package doc). Turn it off
// when the client talks to a proxy that spreads keys over several servers
// (twemproxy, Envoy, a sharded managed database): such a proxy sends a
// command to the server of its first key, or refuses it, where each
// operation's keys share a hash tag and go together. (A refusal for keys
// of several slots, CROSSSLOT, turns it off by itself: the refused
// operations are sent again one command each.) A Cluster's or a Ring's
// client sends one EVALSHA per operation in any case. Default: on.
func WithCombinedScripts(on bool) Option { return func(c *config) { c.separate = !on } }

// New returns a store that keeps its state in client's Redis. It warms the
// client up (WithWarmup): dials connections and loads the script, waiting
// at most a second, and returns the store whether Redis answered or not;
// scripts are loaded again whenever Redis has lost them. Close stops the
// batching workers, if any; it does not close client.
func New(client Client, opts ...Option) (*Store, error) {
	if isNil(client) {
		return nil, fmt.Errorf("%w: nil client", ErrConfig)
	}
	c := config{prefix: DefaultPrefix, margin: DefaultMargin, maxKeyLen: DefaultMaxKeyLen,
		batchSize: DefaultBatchSize, batch: DefaultBatchWorkers, warmConns: DefaultWarmupConns, warmFor: DefaultWarmupTimeout}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case c.nilOption != "":
		return nil, fmt.Errorf("%w: %s", ErrConfig, c.nilOption)
	case strings.ContainsAny(c.prefix, "{}"):
		return nil, fmt.Errorf("%w: prefix %q contains a brace", ErrConfig, c.prefix)
	case c.margin < 0:
		return nil, fmt.Errorf("%w: negative margin %v", ErrConfig, c.margin)
	case c.opTTL < 0:
		return nil, fmt.Errorf("%w: negative operation TTL %v", ErrConfig, c.opTTL)
	case c.maxKeyLen < 1:
		return nil, fmt.Errorf("%w: maximum key length %d", ErrConfig, c.maxKeyLen)
	case c.waitN < 0 || (c.waitN > 0 && c.waitFor <= 0):
		return nil, fmt.Errorf("%w: WithWait(%d, %v): want replicas ≥ 1 and a positive timeout, or 0", ErrConfig, c.waitN, c.waitFor)
	case c.batch < 0 || c.batchSize < 0:
		return nil, fmt.Errorf("%w: WithBatching(%d, %d): negative", ErrConfig, c.batchSize, c.batch)
	case c.batch > 0 && c.batchSize < 1:
		return nil, fmt.Errorf("%w: batch size %d", ErrConfig, c.batchSize)
	case c.warmConns < 0 || c.warmFor < 0 || (c.warmConns > 0) != (c.warmFor > 0):
		return nil, fmt.Errorf("%w: WithWarmup(%d, %v): want both positive, or both 0", ErrConfig, c.warmConns, c.warmFor)
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // never fails (crypto/rand panics instead)
	s := &Store{
		client:     client,
		prefix:     c.prefix,
		maxKeyLen:  c.maxKeyLen,
		margin:     ceilMillis(c.margin),
		opTTL:      ceilMillis(c.opTTL),
		waitN:      c.waitN,
		waitMS:     ceilMillis(c.waitFor),
		opBase:     hex.EncodeToString(seed[:]) + ".",
		maxScripts: maxScripts,
		clock:      newServerClock(),
		obs:        c.obs,
		log:        ratelog.New(c.logger),
	}
	s.separate.Store(c.separate)
	s.lanes = newLanes(s, client, c.batchSize, c.batch)
	if c.warmConns > 0 {
		warm(client, c.warmConns, c.warmFor, s.combines(client))
		if c.waitN > 0 {
			s.checkWaitTicks(c.waitFor, c.warmFor)
		}
	}
	return s, nil
}

// isNil reports whether c is nil or holds a nil pointer: a
// (*redis.Client)(nil) would crash the first call, in a goroutine of the
// store's where the caller could not recover it.
func isNil(c Client) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Apply implements core.Store: it runs op as one script, atomically, in one
// round trip whatever the number of limits. Time is op.Now when set, else
// the Redis server's TIME.
func (s *Store) Apply(ctx context.Context, op engine.Op) (engine.Result, error) {
	return s.ApplyBy(ctx, op, time.Time{})
}

// ApplyBy is Apply until deadline as well as under ctx (a zero deadline
// adds none): core.Limiter calls it with the Limiter's timeout (see
// core.Store), where a context with that deadline would cost a timer, a
// context and a channel on every call. A caller whose operation waits in a
// batch is given up for by its batcher's watch (one timer for all its
// callers, watch.go); one whose operation has a goroutine of its own
// (batching off) waits with a timer it reuses; one that sends its own
// command is given a context with the deadline, for go-redis to bound its
// reads by.
func (s *Store) ApplyBy(ctx context.Context, op engine.Op, deadline time.Time) (engine.Result, error) {
	if s.closed.Load() {
		return engine.Result{}, fmt.Errorf("redisstore: %s: %w", op.Kind, core.ErrClosed)
	}
	if err := op.Validate(); err != nil {
		return engine.Result{}, err
	}
	c := s.newCall(&op)
	c.deadline = earlier(ctx, deadline)
	l := s.lanes.of(c.keys[0])
	c.lane = l
	var reply any
	var err error
	switch {
	case l.inflight.Add(1) == 1 && s.canInline(l, c):
		reply, err = s.inline(ctx, l, c)
	case l.batch != nil:
		reply, err = l.batch.do(ctx, c)
	default:
		reply, err = s.direct(ctx, l, c)
	}
	if err != nil {
		return engine.Result{}, fmt.Errorf("redisstore: %s %.64q: %w", op.Kind, op.Key, err)
	}
	res, err := decode(&op, c.leased, reply)
	if err != nil {
		return engine.Result{}, fmt.Errorf("redisstore: %s %.64q: %w", op.Kind, op.Key, err)
	}
	return res, nil
}

// command returns the script for op, and its KEYS and ARGV (see
// apply.lua.tmpl), ARGV[1] an *opArgs. op is valid. Its record's TTL is
// the longest life of the operation's record, or 0 for none, and its
// deadline 0: stamp sets them for the context the call is sent under. The
// receipt's lane and number are 0: inline sets them for a call its caller
// sends itself.
//
// It is for tests, and takes a specialized script as loaded, as calls
// find it once it is (see useScript): run loads it should the server lack
// it.
func (s *Store) command(op *engine.Op) (sc *script, keys []string, args []any) {
	if pp := s.prepare(op.Plan); pp.script != generic {
		pp.script.loaded.Store(true)
	}
	c := s.newCall(op)
	return c.script, c.keys, c.args
}

// newCall returns the call of op's script (see command).
func (s *Store) newCall(op *engine.Op) *call {
	c := new(call)
	c.op = *op
	pp := s.prepare(op.Plan)
	state := pp.head + tag(op.Key, s.maxKeyLen) + "}" // as stateKey, one allocation
	c.keyBuf[0] = state
	keys := c.keyBuf[:1]
	a := &c.argv
	a.now, a.kind, a.cost = op.Now, int64(op.Kind), op.Cost
	if op.Kind == engine.Release {
		a.cost = op.Lease
	}
	switch {
	case op.Kind == engine.Peek: // changes nothing: any number of copies may run
	case s.opTTL > 0:
		a.recordTTL = s.opTTL
		keys = append(keys, state+":op:"+s.opBase+strconv.FormatUint(s.opSeq.Add(1), 36))
	default:
		a.once.armed = true
	}
	args := c.argBuf[:1]
	args[0] = a
	c.script, c.leased = s.useScript(pp), pp.leased
	if c.script == generic {
		args = append(args, pp.params)
	} // else the script holds its parameters
	if op.Receipt != nil && op.Kind == engine.Refund {
		args = append(args, formatReceipt(op.Receipt))
	}
	for _, lg := range pp.logs {
		keys = append(keys, logKey(state, lg.ident, lg.rank))
	}
	c.keys, c.args = keys, args
	return c
}

// prepared is what the store derives from a plan once: the parameters,
// the script to run, and which limits keep logs.
type prepared struct {
	params any     // ARGV[2], the formatted string, boxed once
	script *script // the script to run: specialized, or generic
	logs   []logOf // the limits with logs, in order
	leased bool    // some limit is a Concurrency limit: a Take may acquire a lease
	head   string  // what the plan's state keys start with (keyHead)
}

// logOf names the log of a limit: its layout, and its rank among the
// plan's limits of that layout.
type logOf struct {
	ident uint64
	rank  int
}

// prepare returns what the store derives from plan, made on its first use
// and kept on the plan (engine.Plan.Value). Plans without logs get a script
// specialized to their limits (fastpath.go), while the store holds fewer
// than maxScripts distinct ones.
func (s *Store) prepare(plan *engine.Plan) *prepared {
	if v, ok := plan.Value(s); ok {
		return v.(*prepared)
	}
	params, logs := formatParams(plan.Limits, s.margin)
	pp := &prepared{params: any(params), script: generic, leased: hasConcurrency(plan), head: s.keyHead(plan.Scope)}
	for i, l := range plan.Limits {
		if !l.Algorithm.Logs() {
			continue
		}
		rank := 0
		for j := range i {
			if plan.Limits[j].Ident == l.Ident {
				rank++
			}
		}
		pp.logs = append(pp.logs, logOf{l.Ident, rank})
	}
	if !logs {
		// params decides the script: look it up first, and render one
		// (about 100 µs) only when the store has room for it.
		s.scriptMu.Lock()
		have, ok := s.scripts[params]
		room := len(s.scripts) < s.maxScripts
		s.scriptMu.Unlock()
		switch {
		case ok:
			pp.script = have
		case room:
			if sc := specialize(plan.Limits, params, s.margin); sc != nil {
				s.scriptMu.Lock()
				if have, ok := s.scripts[params]; ok {
					pp.script = have
				} else if len(s.scripts) < s.maxScripts {
					if s.scripts == nil {
						s.scripts = make(map[string]*script)
					}
					s.scripts[params] = sc
					pp.script = sc
				}
				s.scriptMu.Unlock()
			}
		}
	}
	return plan.SetValue(s, pp).(*prepared)
}

// formatReceipt formats a refund's receipt, the script's last argument
// (see apply.lua.tmpl): little-endian doubles, each an integer within 2^53
// for a valid receipt.
func formatReceipt(rc *engine.Receipt) string {
	b := make([]byte, 0, 32+8*len(rc.Reset))
	for _, v := range []int64{rc.At, rc.Span, rc.Cost, int64(len(rc.Reset))} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(min(v, 1<<53))))
	}
	for _, v := range rc.Reset {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(min(max(v, -1), 1<<53))))
	}
	return string(b)
}

// formatParams formats ARGV[2] (see apply.lua.tmpl): little-endian doubles, which
// hold every parameter exactly (each is below 2^53), and reports whether
// some limit keeps a log.
func formatParams(limits []engine.Limit, margin int64) (string, bool) {
	b := make([]byte, 0, 8*(3+9*len(limits)))
	put := func(v int64) { b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(v))) }
	put(margin)
	put(engine.DebtFactor)
	put(int64(len(limits)))
	logs := false
	for _, p := range limits {
		logs = logs || p.Algorithm.Logs()
		wide := int64(0) // 1: the script takes its exact path (engine.Limit.Wide)
		if p.Wide {
			wide = 1
		}
		for _, v := range [...]int64{int64(p.Algorithm), p.Quota, p.Capacity, wide, p.Period,
			p.Precision, p.Buckets, int64(p.Ident >> 32), int64(p.Ident & math.MaxUint32)} {
			put(v)
		}
	}
	return string(b), logs
}

// recordSlack is how long, ms, an operation's record outlives the deadline
// of the context the operation is sent under: go-redis sends no copy of a
// command once its context is done, so a copy sent before the deadline
// runs, on a server that is not stalled, well within this.
const recordSlack = 200

// stamp sets the arguments of c that depend on when it is sent: the
// deadline, its caller's deadline in the server's clock, for a
// state-changing operation; and the TTL of the operation's record (when
// not 0): until the pipeline's deadline (the caller's, lateGrace
// later) and recordSlack more, or the longest life set by WithOpTTL,
// whichever is shorter. A record costs the server a key of its own while it
// lives (with many live records, about as much as the decision itself), so
// it lives no longer than a retried copy of its command can arrive.
func (s *Store) stamp(c *call, now time.Time) {
	d := c.deadline
	if d.IsZero() {
		return
	}
	a := &c.argv
	if c.op.Kind != engine.Peek {
		a.deadline = s.clock.deadline(d, now)
	}
	if a.recordTTL != 0 {
		a.recordTTL = min(s.opTTL, max(ceilMillis(d.Sub(now)+lateGrace), 0)+recordSlack)
	}
}

// compensate undoes what the operation of c did, as its reply v says, for
// a caller that gave up before the reply came: a Take it admitted or a
// Charge is refunded, with the receipt of its reply (to the window it
// charged, whatever window the undo runs in), a Refund charged back, and
// the lease a Take acquired on Concurrency limits released. (A Reset
// cannot be undone; a Release needs no undoing: its caller meant to free
// the units anyway.)
func (s *Store) compensate(c *call, v any) {
	op := &c.op
	if !c.undoable() || !applied(v) {
		return
	}
	if op.Kind == engine.Refund {
		s.undo(c, 0, nil)
		return
	}
	res, err := decode(op, c.leased, v)
	if err != nil || op.Kind == engine.Take && !res.Allowed {
		return // expired, or denied: nothing to undo
	}
	rc := engine.ReceiptOf(&res, op.Cost)
	s.undo(c, res.Lease, &rc)
}

// undoable reports whether the operation of c may change usage, and so
// be undone: a Take, Charge or Refund of cost > 0.
func (c *call) undoable() bool {
	k := c.op.Kind
	return c.op.Cost > 0 && (k == engine.Take || k == engine.Charge || k == engine.Refund)
}

// undo runs the opposite of the operation of c, which changed usage: a
// Refund with receipt rc for a Take or a Charge, a Charge for a Refund, and
// a Release of lease when it is not 0. It runs at once, in the background,
// under its own timeout. The refund goes back where the charge went (see
// engine.Receipt): it is exact for the window algorithms, whatever window
// the undo runs in, and for GCRA, TokenBucket and LeakyBucket when nothing
// came between (less, never more, when the bucket refilled past it; and
// nothing for a LeakyBucket turn a later request queued behind, or whose
// receipt has no Reset, as a lost reply's has not: the turn then passes
// empty).
func (s *Store) undo(c *call, lease int64, rc *engine.Receipt) {
	op := c.op
	op.Kind, op.Receipt = engine.Refund, rc
	if c.op.Kind == engine.Refund {
		op.Kind, op.Receipt = engine.Charge, nil
	}
	if s.closed.Load() {
		s.undoFailed.Add(1)
		s.event(c.ctx, core.EventCompensation, "", 1, core.ErrClosed)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), lateGrace)
		defer cancel()
		ops := []engine.Op{op}
		if lease != 0 {
			ops = append(ops, engine.Op{Plan: op.Plan, Key: op.Key, Kind: engine.Release, Lease: lease, Now: op.Now})
		}
		// Each is tried though another failed: a failed refund must not
		// leave the lease's units held until the lease runs out.
		var l *lane
		var first error
		for i := range ops {
			u := s.newCall(&ops[i])
			u.deadline = earlier(ctx, time.Time{})
			l = s.lanes.of(u.keys[0])
			if _, err := s.direct(ctx, l, u); err != nil && first == nil {
				first = err
			}
		}
		if first != nil {
			s.undoFailed.Add(1)
			s.event(c.ctx, core.EventCompensation, l.addr, 1, first)
			return
		}
		s.undone.Add(1)
		s.event(c.ctx, core.EventCompensation, l.addr, 1, nil)
	}()
}

// applied reports whether reply v is one of an operation that ran: neither
// an error nor EXPIRED.
func applied(v any) bool {
	r, ok := v.(string)
	return ok && len(r) > 9
}

// run runs sc with EVALSHA, and with EVAL (which loads it) when the server
// does not have it.
func run(ctx context.Context, c Client, sc *script, keys []string, args []any) (any, error) {
	v, err := c.EvalSha(ctx, sc.sha, keys, args...).Result()
	if err != nil && isNoScript(err) {
		rearm(args)
		v, err = c.Eval(ctx, sc.src, keys, args...).Result()
	}
	return v, err
}

// opArgs is ARGV[1] of the apply script (see apply.lua.tmpl): the
// operation's numbers, sent as seven little-endian doubles in one argument,
// which the script reads with one struct.unpack. (Seven arguments in
// decimal cost the server about 0.7 µs more a call, to parse, to make Lua
// strings of and to convert with tonumber, and the client a boxed integer
// each: BENCHMARKS.md.) Each is exact as a double below 2^53, as every
// one is in practice, and rounded beyond, as tonumber rounded the decimal
// arguments before.
type opArgs struct {
	now       int64 // Unix µs; 0: the server's TIME
	kind      int64 // engine.Kind
	cost      int64 // units; for a Release, the lease to end
	recordTTL int64 // ms, the TTL of the operation's record (KEYS[2]); 0: none (stamp)
	deadline  int64 // the server's µs past which the script does nothing; 0: none (stamp)
	lane, seq int64 // the receipt's lane and number (RECEIPTS, inline); 0: none
	once      sendOnce
	buf       [56]byte // the encoding, in the call: go-redis copies it out at once
}

// MarshalBinary encodes a for go-redis, which calls it each time it writes
// the command (see sendOnce).
func (a *opArgs) MarshalBinary() ([]byte, error) {
	if err := a.once.send(); err != nil {
		return nil, err
	}
	for i, v := range [...]int64{a.now, a.kind, a.cost, a.recordTTL, a.deadline, a.lane, a.seq} {
		binary.LittleEndian.PutUint64(a.buf[8*i:], math.Float64bits(float64(v)))
	}
	return a.buf[:], nil
}

// String is for go-redis's logs and tracing hooks, which format arguments:
// the values as they are when formatted (a hook that keeps a command's
// arguments holds the call's opArgs, which a resend may change).
func (a *opArgs) String() string {
	return fmt.Sprintf("op{now=%d kind=%d cost=%d record=%dms deadline=%d lane=%d seq=%d}",
		a.now, a.kind, a.cost, a.recordTTL, a.deadline, a.lane, a.seq)
}

// sendOnce lets a state-changing operation without a record (armed) be
// sent once: go-redis encodes a command's arguments each time it writes
// it, so the second encoding is a second send, which could charge twice if
// the first ran. It fails that encoding with ErrResent, which go-redis does
// not retry.
//
// A command that Redis refused without running it (notRun: a redirect, a
// cluster in transition, NOSCRIPT) may be sent again, by go-redis's own
// retries or by the store's: cmd is the command that carries the
// operation, and its error after the previous send tells.
type sendOnce struct {
	armed bool
	sent  atomic.Bool
	cmd   atomic.Pointer[redis.Cmd]
}

// send reports whether the operation may be sent (now): nil, or ErrResent.
func (o *sendOnce) send() error {
	if o.armed && o.sent.Swap(true) {
		if cmd := o.cmd.Load(); cmd == nil || !notRun(cmd.Err()) {
			return ErrResent
		}
	}
	return nil
}

// rearm lets the operation of args be sent once more: the server refused the
// previous send without running it (NOSCRIPT).
func rearm(args []any) {
	if a, ok := args[0].(*opArgs); ok {
		a.once.sent.Store(false)
	}
}

// isNoScript reports whether err is the server's NOSCRIPT. (It tests nil
// first: HasErrorPrefix allocates, and most commands succeed.)
func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// decode builds the Result of op from the script's reply: after the
// server's time (8 bytes), EXPIRED, a fast reply (see decodeFast) or a
// general one, 5 little-endian doubles per limit (allowed, retry or delay
// µs, remaining, reset µs, window µs), each an integer below 2^53, and when
// leased (op's plan has a Concurrency limit, as prepared.leased records)
// one more, the lease.
func decode(op *engine.Op, leased bool, reply any) (engine.Result, error) {
	r, ok := reply.(string)
	if !ok || len(r) < 9 {
		return engine.Result{}, fmt.Errorf("%w: %T of length %d", ErrReply, reply, len(r))
	}
	srv, _ := exact(r) // the server's time (serverClock reads it too)
	r = r[8:]
	if r == "X" {
		return engine.Result{}, ErrExpired
	}
	if len(r)%32 == fastHeader {
		return decodeFast(op, r)
	}
	n := len(op.Plan.Limits)
	var lease int64
	if leased {
		if len(r) != 40*n+8 {
			return engine.Result{}, fmt.Errorf("%w: %T of length %d for %d limits and a lease", ErrReply, reply, len(r), n)
		}
		if lease, ok = exact(r[40*n:]); !ok {
			return engine.Result{}, fmt.Errorf("%w: the lease is not an integer", ErrReply)
		}
	} else if len(r) != 40*n {
		return engine.Result{}, fmt.Errorf("%w: %T of length %d for %d limits", ErrReply, reply, len(r), n)
	}
	var x [5]int64
	ls := make([]engine.LimitResult, n)
	allowed := true
	for i := range ls {
		for j := range x {
			if x[j], ok = exact(r[40*i+8*j:]); !ok {
				return engine.Result{}, fmt.Errorf("%w: value %d is not an integer", ErrReply, 5*i+j)
			}
		}
		l := engine.LimitResult{Allowed: x[0] == 1, Remaining: x[2], Reset: x[3], Window: x[4]}
		if l.Allowed {
			l.Delay = x[1]
		} else {
			l.Retry = x[1]
		}
		allowed = allowed && l.Allowed
		ls[i] = l
	}
	if !allowed { // nothing is queued unless every limit admits
		for i := range ls {
			ls[i].Delay = 0
		}
	}
	var res engine.Result
	engine.Combine(ls, &res)
	res.Lease, res.At = lease, op.Now
	if op.Now == 0 {
		res.At = srv
	}
	return res, nil
}

// hasConcurrency reports whether some limit of plan is a Concurrency limit.
func hasConcurrency(plan *engine.Plan) bool {
	for i := range plan.Limits {
		if plan.Limits[i].Algorithm == engine.Concurrency {
			return true
		}
	}
	return false
}

// fastHeader is the length of a fast reply's head: the time and the verdict.
const fastHeader = 9

// decodeFast builds the Result of op from a reply of the script's fast
// path: the time it decided at (µs, a little-endian double), its verdict
// ('1' allowed, '0' denied) and the states it read, one 32-byte record per
// limit in order, or none for a fresh key. The Result is engine.Step's on
// those states at that time, the function the script ports; a verdict of
// the script's that differs from Step's is an error (the states it writes
// are held to Step's by the tests).
func decodeFast(op *engine.Op, r string) (engine.Result, error) {
	now, ok := exact(r)
	recs := r[fastHeader:]
	n := len(op.Plan.Limits)
	if !ok || (r[8] != '0' && r[8] != '1') || (len(recs) != 0 && len(recs) != 32*n) {
		return engine.Result{}, fmt.Errorf("%w: fast reply of length %d for %d limits", ErrReply, len(r), n)
	}
	var buf [4]engine.State
	states := buf[:0]
	if n <= len(buf) {
		states = buf[:n]
	} else {
		states = make([]engine.State, n)
	}
	for i := 0; i < len(recs); i += 32 {
		st := &states[i/32]
		st.Ident = uint64(uint32(le64(recs[i:])))<<32 | uint64(uint32(le64(recs[i+4:])))
		var a, b, c bool
		st.A, a = exact(recs[i+8:])
		st.B, b = exact(recs[i+16:])
		st.C, c = exact(recs[i+24:])
		if !a || !b || !c {
			return engine.Result{}, fmt.Errorf("%w: record %d holds a value that is not an integer", ErrReply, i/32)
		}
	}
	var res engine.Result
	if _, err := engine.Step(op, now, states, &res); err != nil {
		return engine.Result{}, err
	}
	if res.Allowed != (r[8] == '1') {
		return engine.Result{}, fmt.Errorf("%w: the script's verdict (%c) differs from engine.Step's", ErrReply, r[8])
	}
	return res, nil
}

// exact reads the little-endian double at the start of s as an int64, and
// whether it is an integer of magnitude at most 2^53, as every number the
// script sends is (a state may reach 2^53: DebtFactor × capacity).
func exact(s string) (int64, bool) {
	f := math.Float64frombits(le64(s))
	v := int64(f)
	return v, float64(v) == f && f >= -(1<<53) && f <= 1<<53
}

// le64 reads a little-endian uint64 from the first 8 bytes of s.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// Close stops the batching workers, if any, failing the operations still
// waiting with core.ErrClosed. It does not close the client. Apply after
// Close returns an error wrapping core.ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		s.lanes.close()
	})
	return nil
}

var _ core.Store = (*Store)(nil)

// Part implements core.Partitioned: on a Redis Cluster, the address of the
// master that holds key in scope, so that the Limiter keeps a circuit
// breaker per master; "" on other clients.
func (s *Store) Part(scope, key string) string {
	if s.lanes.cluster == nil {
		return ""
	}
	return s.lanes.part(s.stateKey(scope, key))
}

var _ core.Partitioned = (*Store)(nil)
