package redisstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// A call is one operation's script on its way to Redis: its KEYS and ARGV
// (in room kept in the call for the usual case: one allocation per
// operation), its operation, the caller's context, and the channel on
// which the caller is answered.
//
// A caller waits for its call until its context ends; the call itself goes
// on past that (see lateGrace), so that its reply is never lost to a
// caller that left: state records who went first. A caller that finds its
// context done (or its batcher's watch, once its deadline has passed:
// watch.go) moves it from pending to abandoned, and is then answered by
// the failure policy without this call; a sender with the reply moves it
// from pending to answered, and delivers. A reply that finds its call
// abandoned is one the caller was not told of: if it changed the key's
// state, the store undoes it (compensate).
type call struct {
	script *script
	keys   []string
	args   []any
	op     engine.Op
	leased bool            // the plan has a Concurrency limit: a Take may acquire a lease
	ctx    context.Context // what the call runs under (see bind)
	// deadline is when the call gives up (see bind): the script refuses
	// to run past it (stamp), and a batch waits for no reply much longer
	// (send). Zero: none.
	deadline time.Time
	// done has the call's answer, res, once it is there: buffered, so that
	// its sender never blocks, and of struct{}, one allocation where a
	// channel of result would be two.
	done  chan struct{}
	res   result
	state atomic.Uint32
	slot  int32 // where a batcher's watch keeps the call
	lane  *lane // the lane that counts the call in flight (Apply's calls; see leave)
	sent  int64 // inline calls that leave a receipt: when sent, server µs, a lower bound (see lostReceipt)

	argv   opArgs // ARGV[1]
	keyBuf [2]string
	argBuf [3]any
}

// States of a call.
const (
	pending uint32 = iota
	answered
	abandoned
)

type result struct {
	v   any
	err error
}

// lateGrace is how long past the latest deadline of its callers a batch
// still waits for its replies. A script that ran before its caller's
// deadline (the script refuses to run after it) may reply after it; the
// reply is then still read, and undone if it changed state, unless it comes
// more than lateGrace late: a reply that late is lost, as is the
// connection it was due on.
const lateGrace = time.Second

// bind prepares c to run for a caller waiting under ctx and until
// c.deadline, which already folds in ctx's (see earlier: ApplyBy and
// compensate set it), and returns when that caller stops waiting (giveUp):
// c.deadline, or zero for never.
// c runs under ctx and until then, but for a Release, which frees units
// its caller holds and is wanted even once the caller has given up (a
// Release is idempotent, and undoing it would hold the units until the
// lease runs out): that one runs under ctx without its cancellation, and
// until lateGrace after its caller gives up.
func (c *call) bind(ctx context.Context) time.Time {
	c.ctx, c.done = ctx, make(chan struct{}, 1)
	if c.op.Kind == engine.Release {
		c.ctx = context.WithoutCancel(ctx)
		if !c.deadline.IsZero() {
			c.deadline = c.deadline.Add(lateGrace)
		}
	}
	return c.giveUp()
}

// giveUp returns when c's caller gives up, once bound: c's deadline, but
// for a Release, which runs until lateGrace after it.
func (c *call) giveUp() time.Time {
	if c.op.Kind == engine.Release && !c.deadline.IsZero() {
		return c.deadline.Add(-lateGrace)
	}
	return c.deadline
}

// earlier returns the earlier of ctx's deadline and d, zero for none;
// a zero d is none.
func earlier(ctx context.Context, d time.Time) time.Time {
	if cd, ok := ctx.Deadline(); ok && (d.IsZero() || cd.Before(d)) {
		return cd
	}
	return d
}

// gone returns why c's caller no longer waits at now, or nil while it
// does.
func (c *call) gone(now time.Time) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	if !c.deadline.IsZero() && !now.Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// wait returns c's result, or an error once ctx ends or giveUp passes
// (timer, started at giveUp; nil for never, or for a call its batcher's
// watch gives up for, which answers it with the error) if the call is not
// answered by then.
func (c *call) wait(ctx context.Context, timer *time.Timer) (any, error) {
	var err error
	select {
	case <-c.done:
		return c.res.v, c.res.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-fired(timer):
		err = context.DeadlineExceeded
	}
	if c.state.CompareAndSwap(pending, abandoned) {
		return nil, err
	}
	<-c.done // answered just now
	return c.res.v, c.res.err
}

// Timers for the callers of direct calls (WithBatching(0, 0)), who wait
// until a deadline: one reused per wait, where a context with that
// deadline would make a timer, a context and a channel per call (see
// Store.ApplyBy). Batched calls share their batcher's (watch.go).
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// startTimer returns a timer that fires at giveUp, or nil for a zero
// giveUp. Give it back with stopTimer.
func startTimer(giveUp time.Time) *time.Timer {
	if giveUp.IsZero() {
		return nil
	}
	t := timers.Get().(*time.Timer)
	t.Reset(time.Until(giveUp))
	return t
}

// fired returns t's channel, or nil (which never fires) for a nil t.
func fired(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// stopTimer stops t and keeps it for another wait. Since Go 1.23 a
// stopped timer's channel holds no stale value; a program that asks for
// the old timers (GODEBUG asynctimerchan=1) may find one there, which
// would end the next wait at once: it is drained.
func stopTimer(t *time.Timer) {
	if t != nil {
		quiet(t)
		timers.Put(t)
	}
}

// quiet stops t and empties its channel.
func quiet(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
}

// evalSha returns c's EVALSHA command, for go-redis's Do: what EvalSha
// sends, in one allocation where EvalSha makes four (it boxes the
// command's name and the script's SHA-1 on every call).
func (c *call) evalSha() []any { return evalSha(c.script, c.keys, c.args) }

// evalSha returns the EVALSHA of sc with keys and args, for go-redis's Do.
func evalSha(sc *script, keys []string, args []any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, evalshaName, sc.shaArg, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return append(cmd, args...)
}

// evalshaName is the command's name, boxed once.
var evalshaName any = "evalsha"

// leave ends the count of c among its lane's calls in flight, if it is
// counted there. It runs once the call is done with: answered, dropped, or
// for a call its caller sent itself, once its lost reply is recovered.
func (c *call) leave() {
	if c.lane != nil {
		c.lane.inflight.Add(-1)
		c.lane = nil
	}
}

// finish answers c with its reply, or, if its caller has left, hands the
// reply to the store to undo what it did, and reports whether the caller
// was answered.
func (s *Store) finish(c *call, v any, err error) bool {
	c.leave()
	if c.state.CompareAndSwap(pending, answered) {
		c.res = result{v: v, err: err}
		c.done <- struct{}{}
		return true
	}
	if err == nil {
		s.compensate(c, v)
	}
	return false
}

// batcher coalesces concurrent scripts into pipelines: workers goroutines
// each take one waiting call, then every other call already waiting (up to
// size), and send them in one pipeline with client. Nothing waits for a
// batch to fill.
type batcher struct {
	s             *Store
	client        Client
	addr          string // the node's, "" when not on a Cluster
	size, workers int
	queue         chan *call
	watch         *watch        // gives up for the callers at their deadlines
	stop          chan struct{} // closed by close
	ctx           context.Context
	cancel        context.CancelFunc
	wg            sync.WaitGroup
}

func newBatcher(s *Store, client Client, addr string, size, workers int) *batcher {
	b := &batcher{s: s, client: client, addr: addr, size: size, workers: workers,
		queue: make(chan *call, size*workers), watch: newWatch(), stop: make(chan struct{})}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.wg.Add(workers)
	for range workers {
		go b.work()
	}
	return b
}

// do runs the script through a worker, returning when it is done, when
// ctx is, or when the caller's deadline passes (the batcher's watch),
// whichever is first.
func (b *batcher) do(ctx context.Context, c *call) (any, error) {
	if !c.bind(ctx).IsZero() {
		b.watch.add(c)
		defer b.watch.remove(c)
	}
	var err error
	select {
	case b.queue <- c:
		select {
		case <-b.stop:
			// Closed: Close may have emptied the queue before c joined
			// it, and no worker takes it any more, so the caller, who
			// may have no deadline, is answered here. A worker that took
			// c all the same finds it abandoned, and undoes what it did.
			// (The lane's count in flight no longer matters.)
			if c.state.CompareAndSwap(pending, abandoned) {
				return nil, core.ErrClosed
			}
		default:
		}
		return c.wait(ctx, nil) // Close answers what it stops with ErrClosed
	// Not sent: the queue is full (a stalled server).
	case <-ctx.Done():
		err = ctx.Err()
	case <-c.done: // the watch gave up for the caller
		err = c.res.err
	case <-b.stop:
		err = core.ErrClosed
	}
	c.leave()
	return nil, err
}

func (b *batcher) close() {
	close(b.stop)
	b.cancel()
	b.wg.Wait()
	for {
		select {
		case c := <-b.queue:
			b.s.finish(c, nil, core.ErrClosed)
		default:
			return
		}
	}
}

func (b *batcher) work() {
	defer b.wg.Done()
	batch := make([]*call, 0, b.size)
	for {
		batch = batch[:0]
		select {
		case c := <-b.queue:
			batch = append(batch, c)
		case <-b.stop:
			return
		}
	fill:
		for len(batch) < b.size {
			select {
			case c := <-b.queue:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		b.s.send(b.ctx, b.client, b.addr, batch)
	}
}

// send runs the live calls of batch (those whose callers still wait) in one
// pipeline with client, and answers each. The pipeline's context ends
// lateGrace after the latest deadline of its callers (if every one has
// one), or with base. addr names the node of client, for events.
func (s *Store) send(base context.Context, client Client, addr string, batch []*call) {
	live := batch[:0]
	var latest time.Time
	bounded := true
	now := time.Now()
	for _, c := range batch {
		if err := c.gone(now); err != nil {
			s.finish(c, nil, err) // its caller is gone: never run it
			continue
		}
		live = append(live, c)
		if c.deadline.IsZero() {
			bounded = false
		} else if c.deadline.After(latest) {
			latest = c.deadline
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := base
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest.Add(lateGrace))
		defer cancel()
	}
	res := s.exec(ctx, client, addr, live, false)
	for i, c := range live {
		v, err := res[i].v, res[i].err
		if errors.Is(err, context.Canceled) && base.Err() != nil {
			err = core.ErrClosed
		}
		if !s.finish(c, v, err) && err != nil && !errors.Is(err, core.ErrClosed) && !isContextErr(err) {
			// The caller gave up (its timeout answered by the failure
			// policy, seen as a deadline): this is the real cause.
			s.event(c.ctx, core.EventStoreFailure, addr, 1, err)
		}
	}
}

// exec runs calls in one pipeline with client under ctx, each stamped for
// the context it runs under (call.ctx), and returns their replies or
// errors, in order. Where the server lost the script it loads it and sends
// the calls again; what a Cluster's node refused unrun it sends again
// through the store's client, which follows the redirects. A failure to
// get a reply from client's node starts topology reloads (nodes.go),
// unless ctx is the caller's own (own: an inline call) and its deadline
// has passed: a caller's short deadline is no sign of a failing node. addr names the
// node of client, for events; it is "" when client is the store's own
// (which exec tells so, and not with ==: a Client of a type == cannot
// compare would panic).
func (s *Store) exec(ctx context.Context, client Client, addr string, calls []*call, own bool) []result {
	node := addr != "" // client is one node's of a Cluster, not the store's
	now := time.Now()  // one reading for the batch's deadlines
	if s.clock.stale(now, calls) && s.askTime(ctx, client) {
		now = time.Now()
	}
	for _, c := range calls {
		s.stamp(c, now)
	}
	cmds := make([]*redis.Cmd, len(calls)) // the command that carries each call
	pipe := client.Pipeline()
	var ms []*multi
	var at []place
	if !own && !node {
		ms, at = s.multiOf(client, calls) // several calls of a script in one command (multi.go)
	}
	for _, m := range ms {
		m.send(ctx, pipe, calls, cmds)
	}
	for i, c := range calls {
		if cmds[i] == nil {
			cmds[i] = pipe.Do(ctx, c.evalSha()...)
			c.argv.once.cmd.Store(cmds[i])
		}
	}
	// A node whose replicas have acknowledged no WAIT for waitGrace is
	// sent none for a while (see WithWait): its operations are decided,
	// and counted as unreplicated.
	var nw *nodeWait
	if s.waitN > 0 {
		nw = s.nodeWait(addr)
	}
	degraded := nw != nil && nw.paused()
	var wait *redis.Cmd
	if !degraded {
		wait = s.waitFor(pipe, ctx, calls)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	var reload, redirect []int
	var reloadM []*multi
	for i, cmd := range cmds {
		err := cmd.Err()
		twin := at != nil && at[i].m != nil
		switch {
		case twin && crossSlot(err):
			// A proxy in front of several servers refused the twin unrun:
			// each of its calls goes again alone, and from now on every
			// call does (multi.go).
			s.separate.Store(true)
			at[i] = place{}
			reload = append(reload, i)
		case twin && isNoScript(err):
			if at[i].k == 0 {
				reloadM = append(reloadM, at[i].m)
			}
		case isNoScript(err):
			reload = append(reload, i)
		case node && notRun(err):
			redirect = append(redirect, i)
		}
	}
	// evalAlone sends each call of is again with EVAL, which loads its
	// script, in a pipeline of their own, ended by a WAIT when one is due
	// (the EVALs come after the first WAIT).
	evalAlone := func(is []int, twins []*multi) {
		pipe := client.Pipeline()
		for _, i := range is {
			rearm(calls[i].args)
			cmds[i] = pipe.Eval(ctx, calls[i].script.src, calls[i].keys, calls[i].args...)
			calls[i].argv.once.cmd.Store(cmds[i])
		}
		for _, m := range twins {
			m.load(ctx, pipe, calls, cmds)
		}
		if degraded {
			// no WAIT: see above
		} else if w := s.waitFor(pipe, ctx, calls); w != nil {
			wait = w
		}
		_, _ = pipe.Exec(ctx)
	}
	if len(reload)+len(reloadM) > 0 { // the server lost the script: EVAL loads it again
		evalAlone(reload, reloadM)
		for _, i := range reload {
			if node && notRun(cmds[i].Err()) {
				redirect = append(redirect, i)
			}
		}
		// A proxy that answered NOSCRIPT before it looked at the keys
		// refuses the twin's EVAL for its slots: as above.
		var alone []int
		for _, m := range reloadM {
			if crossSlot(m.cmd.Err()) {
				s.separate.Store(true)
				for _, i := range m.calls {
					at[i] = place{}
					alone = append(alone, i)
				}
			}
		}
		if len(alone) > 0 {
			evalAlone(alone, nil)
		}
		s.event(context.Background(), core.EventScriptLoad, addr, int64(len(reload)+len(reloadM)), nil)
	}
	if len(redirect) > 0 {
		// A node refused without running them (the slot moved, the node is
		// loading or no master any more): the cluster client follows the
		// redirects and retries.
		s.redirected.Add(int64(len(redirect)))
		s.event(context.Background(), core.EventRedirect, addr, int64(len(redirect)), nil)
		pipe = s.client.Pipeline()
		for _, i := range redirect {
			rearm(calls[i].args)
			cmds[i] = pipe.Do(ctx, calls[i].evalSha()...)
			calls[i].argv.once.cmd.Store(cmds[i])
		}
		_, _ = pipe.Exec(ctx)
		for _, i := range redirect {
			if isNoScript(cmds[i].Err()) {
				cmds[i] = s.evalOne(ctx, calls[i])
				s.event(context.Background(), core.EventScriptLoad, "", 1, nil)
			}
		}
		s.lanes.cluster.ReloadState(ctx)
		s.event(context.Background(), core.EventTopologyReload, "", 1, nil)
	}
	lenient := degraded
	if wait != nil {
		lenient = nw.waited(s.acknowledged(wait))
	}
	res := make([]result, len(calls))
	var failed bool
	var unreplicated int64
	var srv int64 // the latest server time the replies carry; 0: none
	for i, c := range calls {
		var v any
		var err error
		if at != nil && at[i].m != nil {
			v, err = at[i].m.reply(at[i].k)
		} else {
			v, err = cmds[i].Result()
		}
		if t, ok := serverTime(v); ok && t > srv {
			srv = t
		}
		if err == nil && c.op.Kind != engine.Peek && (degraded || wait != nil && !s.replicated(wait, redirect, i)) {
			if lenient {
				unreplicated++ // decided all the same: see WithWait
			} else {
				err = ErrNotReplicated
			}
		}
		failed = failed || transport(err)
		res[i] = result{v, err}
	}
	if srv > 0 {
		s.clock.observe(srv, time.Now())
	}
	if unreplicated > 0 {
		s.unreplicated.Add(unreplicated)
		s.eventMsg(context.Background(), core.EventStoreFailure, addr, unreplicated, ErrNotReplicated,
			"redisstore: changes decided without enough replicas' acknowledgement (WithWait): a failover now may lose them")
	}
	if failed && !(own && expired(ctx)) {
		s.lanes.failed(client)
	}
	return res
}

// askTime reads the server's clock with TIME through client under ctx,
// for a batch about to be stamped with an offset too old to trust (see
// serverClock.stale), and reports whether it did.
func (s *Store) askTime(ctx context.Context, client Client) bool {
	pipe := client.Pipeline()
	cmd := pipe.Time(ctx)
	_, _ = pipe.Exec(ctx)
	t, err := cmd.Result()
	if err != nil {
		return false
	}
	s.clock.observe(t.UnixMicro(), time.Now())
	return true
}

// expired reports whether ctx has ended or its deadline has passed: a
// read that the deadline cut short may return before ctx's own timer
// fires.
func expired(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(d)
}

// evalOne runs c's script with EVAL (loading it) through the store's own
// client.
func (s *Store) evalOne(ctx context.Context, c *call) *redis.Cmd {
	rearm(c.args)
	pipe := s.client.Pipeline()
	cmd := pipe.Eval(ctx, c.script.src, c.keys, c.args...)
	c.argv.once.cmd.Store(cmd)
	_, _ = pipe.Exec(ctx)
	return cmd
}

// direct runs c on its own, from a goroutine of its own, for a store
// without batching: the caller returns at its deadline, and the reply is
// still read after it.
func (s *Store) direct(ctx context.Context, l *lane, c *call) (any, error) {
	timer := startTimer(c.bind(ctx))
	defer stopTimer(timer)
	go s.send(context.Background(), l.client, l.addr, []*call{c})
	return c.wait(ctx, timer)
}

// waitFor adds WAIT to pipe, with WithWait, when calls has a state-changing
// operation: it returns when as many replicas as asked acknowledged every
// write before it on the connection, or after the timeout. Else it returns
// nil.
func (s *Store) waitFor(pipe redis.Pipeliner, ctx context.Context, calls []*call) *redis.Cmd {
	if s.waitN == 0 {
		return nil
	}
	for _, c := range calls {
		if c.op.Kind != engine.Peek {
			return pipe.Do(ctx, "WAIT", s.waitN, s.waitMS)
		}
	}
	return nil
}

// With WithWait, a node whose replicas acknowledge no WAIT in time fails
// the unacknowledged operations for waitGrace (a replica lagging, a
// failover under way: the strict guarantee holds); past it (a master
// whose only replica is gone, a promoted replica with none of its own),
// its operations are decided and reported, and it is sent no WAIT for
// waitPause at a time, lest each pipeline wait the whole timeout for
// replicas that are not there. A WAIT acknowledged ends it.
const (
	waitGrace = time.Second
	waitPause = time.Second
)

// A nodeWait is a node's record of its replicas' acknowledgements.
type nodeWait struct {
	since atomic.Int64 // Unix ns of the first unacknowledged WAIT of a run; 0: none
	pause atomic.Int64 // Unix ns until which the node is sent no WAIT
}

// nodeWait returns the record of the node at addr.
func (s *Store) nodeWait(addr string) *nodeWait {
	if v, ok := s.waitOff.Load(addr); ok {
		return v.(*nodeWait)
	}
	v, _ := s.waitOff.LoadOrStore(addr, new(nodeWait))
	return v.(*nodeWait)
}

// paused reports whether the node is sent no WAIT now.
func (w *nodeWait) paused() bool { return time.Now().UnixNano() < w.pause.Load() }

// waited records a WAIT's outcome, and reports whether the operations it
// did not acknowledge are decided all the same (the run of unacknowledged
// WAITs has lasted waitGrace) rather than failed.
func (w *nodeWait) waited(ok bool) bool {
	if ok {
		w.since.Store(0)
		return true
	}
	now := time.Now().UnixNano()
	w.since.CompareAndSwap(0, now)
	if now-w.since.Load() < int64(waitGrace) {
		return false
	}
	w.pause.Store(now + int64(waitPause))
	return true
}

// acknowledged reports whether WAIT's reply w counts enough replicas.
func (s *Store) acknowledged(w *redis.Cmd) bool {
	n, err := w.Int64()
	return err == nil && n >= int64(s.waitN)
}

// replicated reports whether WAIT's reply w acknowledges the operation of
// call i: enough replicas acknowledged, and the call was not redirected to
// another connection.
func (s *Store) replicated(w *redis.Cmd, redirect []int, i int) bool {
	n, err := w.Int64()
	return err == nil && n >= int64(s.waitN) && !slices.Contains(redirect, i)
}
