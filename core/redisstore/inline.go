package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// Calls sent inline. A call finds its lane (its node's queue) with nothing
// else in flight most of the time when the store is not busy, and then a
// hand-off to a worker goroutine is most of its cost: waking the worker
// and, with the reply, waking the caller again costs a lone caller about
// 30 µs on a loaded two-core machine, half a loopback round trip. Such a
// call is sent by its caller itself, under the caller's own context, and
// only what queues behind a call in flight is batched.
//
// Its reply is then read under the caller's deadline, which the batched
// path extends by lateGrace to read late replies and undo what they did
// (compensate): a reply that comes after the deadline is lost with its
// connection. What the operation did is learned from the key instead. The
// operation carries its lane and its number there, and if it changes usage
// (an admitted Take, a Charge, a Refund) the script leaves a receipt in the
// key, which expires receiptLife after the deadline (RECEIPTS in
// apply.lua.tmpl). When the reply is lost, the store waits for the
// deadline to pass in the server's clock (the script refuses to run after
// it, so the answer cannot change), looks for the receipt (recover.lua),
// and undoes the operation if it finds it. With operation records
// (WithOpTTL) it sends the operation again instead, which replies as the
// first run did. Until then the lane counts the call in flight: its next
// call, which would replace the lane's receipt in a key, goes to the
// batcher instead of inline.
//
// A call is sent inline when it has a deadline (its context's, or
// ApplyBy's, which the call's context then carries), its lane's client
// bounds reads by that deadline (ContextTimeoutEnabled, and a ReadTimeout
// that sets deadlines), the store has learned the server's clock (to stamp
// the deadline), and its plan has no Concurrency limit (a receipt carries
// no lease) and it is not a Release (which must outlive its caller).

// receiptLife is how long a receipt outlives the deadline of its
// operation: as long as the batched path reads a late reply, and the slack
// an operation record has.
const receiptLife = lateGrace + recordSlack*time.Millisecond

//go:embed recover.lua
var recoverLua string

// recoverScript is recover.lua.
var recoverScript = newScript(recoverLua)

// canInline reports whether c, which has its lane l to itself, may be sent
// by its caller (see above).
func (s *Store) canInline(l *lane, c *call) bool {
	return !c.deadline.IsZero() && l.honours && !c.leased && c.op.Kind != engine.Release && s.clock.known()
}

// inline runs c for its caller, waiting under ctx and until c.deadline,
// on l (see above): under a context that carries c.deadline, for go-redis
// to bound the command's reads and writes by.
func (s *Store) inline(ctx context.Context, l *lane, c *call) (any, error) {
	if d, ok := ctx.Deadline(); !ok || c.deadline.Before(d) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, c.deadline)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		c.leave()
		return nil, err
	}
	c.ctx = ctx
	if s.opTTL == 0 && c.undoable() {
		c.argv.lane, c.argv.seq = l.id, l.seq.Add(1)
		now := time.Now()
		c.sent = s.clock.deadline(now, now) // no later than the server's time now
	}
	r := s.exec(ctx, l.client, l.addr, []*call{c}, true)[0]
	switch {
	case r.err == nil && refused(r.v):
		// The key holds too many receipts of other lanes: the script did
		// nothing. A worker sends it again, without a receipt.
		c.argv.lane, c.argv.seq = 0, 0
		rearm(c.args)
		if l.batch != nil {
			return l.batch.do(ctx, c)
		}
		return s.direct(ctx, l, c)
	case r.err != nil && c.undoable() && lost(r.err):
		go s.recover(c) // leaves c when done
	default:
		c.leave()
	}
	if r.err != nil && ctx.Err() != nil {
		var ne net.Error
		if !isContextErr(r.err) && !(errors.As(r.err, &ne) && ne.Timeout()) {
			// The caller sees its deadline, as a batched call does: this
			// is the real cause.
			s.event(ctx, core.EventStoreFailure, l.addr, 1, r.err)
		}
		return nil, ctx.Err()
	}
	return r.v, r.err
}

// recover finds out whether the operation of c, sent inline, whose reply
// was lost, changed usage, and if it did undoes it (see above). Then it
// ends the count of c in flight on its lane.
func (s *Store) recover(c *call) {
	defer c.leave()
	d := c.deadline
	ctx, cancel := context.WithDeadline(context.Background(), d.Add(lateGrace))
	defer cancel()
	fail := func(err error) {
		s.undoFailed.Add(1)
		s.event(c.ctx, core.EventCompensation, "", 1, err)
	}
	if s.opTTL > 0 {
		// The same operation again: its record holds the first run's reply,
		// or, past the deadline, it changes nothing (EXPIRED).
		v, err := run(ctx, s.client, c.script, c.keys, c.args)
		if err != nil {
			fail(err)
			return
		}
		s.compensate(c, v)
		return
	}
	// The script's deadline, in the server's clock, is never later than
	// d: ask once it has passed, not every millisecond before.
	if w := time.Until(d); w > 0 {
		select {
		case <-time.After(w):
		case <-ctx.Done():
			fail(ctx.Err())
			return
		}
	}
	for {
		v, err := run(ctx, s.client, recoverScript, c.keys[:1], []any{c.argv.lane, c.argv.seq, c.argv.deadline})
		r, _ := v.(string)
		switch {
		case err != nil:
			fail(err)
			return
		case len(r) != 9:
			fail(ErrReply)
			return
		case r[8] == '1':
			s.undo(c, 0, c.lostReceipt())
			return
		case r[8] == 'E': // the server's clock has not passed the deadline
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
				fail(ctx.Err())
				return
			}
		default:
			return // no receipt: the operation changed nothing
		}
	}
}

// lostReceipt returns the receipt of the charge the operation of c made,
// its reply lost: the caller's time when it passed one (op.Now), else the
// server's, known only to lie between the send (c.sent, a lower bound) and
// the deadline. nil for a Refund, which is undone by a Charge. It carries
// no Reset (the reply that had it is lost): a LeakyBucket's charge is then
// not given back, and its turn passes empty (engine's queueTail).
func (c *call) lostReceipt() *engine.Receipt {
	op := &c.op
	if op.Kind == engine.Refund {
		return nil
	}
	if op.Now != 0 {
		return &engine.Receipt{At: op.Now, Cost: op.Cost}
	}
	at := c.argv.deadline // in the server's clock
	lo := min(max(c.sent, 1), at)
	return &engine.Receipt{At: at, Span: at - lo, Cost: op.Cost}
}

// refused reports whether v is the script's reply that it did nothing for
// want of room for a receipt.
func refused(v any) bool {
	r, ok := v.(string)
	return ok && len(r) == 9 && r[8] == 'R'
}

// lost reports whether err leaves unknown whether the command ran: no
// reply came (a timeout, a broken connection, ErrResent). A reply that is
// an error, a reply that came without enough replicas' acknowledgement
// (ErrNotReplicated), and failures to send anything (a refused dial, no
// connection free in the pool) are not.
func lost(err error) bool {
	var rerr redis.Error
	var op *net.OpError
	switch {
	case err == nil, errors.As(err, &rerr), errors.Is(err, ErrNotReplicated),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed):
		return false
	case errors.As(err, &op) && op.Op == "dial":
		return false
	}
	return true
}

// honoursDeadlines reports whether client bounds its reads and writes by a
// context's deadline: a go-redis client with ContextTimeoutEnabled whose
// timeouts set deadlines on the connection (not -2, resolved to -1).
func honoursDeadlines(client Client) bool {
	var enabled bool
	var read, write time.Duration
	switch c := client.(type) {
	case *redis.Client:
		o := c.Options()
		enabled, read, write = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
	case *redis.ClusterClient:
		o := c.Options()
		enabled, read, write = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
	case *redis.Ring:
		o := c.Options()
		enabled, read, write = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
	}
	return enabled && read >= 0 && write >= 0
}
