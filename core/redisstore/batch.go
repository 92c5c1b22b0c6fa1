package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
)

// batcher coalesces concurrent scripts into pipelines: workers goroutines
// each take one waiting call, then every other call already waiting (up to
// size), and send them in one pipeline. Nothing waits for a batch to fill.
type batcher struct {
	client Client
	size   int
	queue  chan *call
	stop   chan struct{} // closed by close
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// A call is one operation's script: its KEYS and ARGV (in room kept in
// the call for the usual case: one allocation per operation), and when
// batched its context and the channel its worker answers on.
type call struct {
	script *script
	keys   []string
	args   []any
	ctx    context.Context
	done   chan result // buffered: a worker never blocks on a caller that left

	once   sendOnce
	keyBuf [2]string
	argBuf [5]any
}

type result struct {
	v   any
	err error
}

func newBatcher(client Client, size, workers int) *batcher {
	b := &batcher{client: client, size: size, queue: make(chan *call, size*workers), stop: make(chan struct{})}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.wg.Add(workers)
	for range workers {
		go b.work()
	}
	return b
}

// do runs the script through a worker, returning when it is done or when
// ctx is, whichever is first.
func (b *batcher) do(ctx context.Context, c *call) (any, error) {
	c.ctx, c.done = ctx, make(chan result, 1)
	select {
	case b.queue <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.stop:
		return nil, core.ErrClosed
	}
	select {
	case r := <-c.done:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.stop:
		return nil, core.ErrClosed
	}
}

func (b *batcher) close() {
	close(b.stop)
	b.cancel()
	b.wg.Wait()
	for {
		select {
		case c := <-b.queue:
			c.done <- result{err: core.ErrClosed}
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
		b.run(batch)
	}
}

// run sends the live calls of batch (those whose callers still wait) in one
// pipeline, under the latest of their deadlines when every one has one.
func (b *batcher) run(batch []*call) {
	live := batch[:0]
	var latest time.Time
	bounded := true
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.done <- result{err: err} // its caller is gone: never run it
			continue
		}
		live = append(live, c)
		if d, ok := c.ctx.Deadline(); !ok {
			bounded = false
		} else if d.After(latest) {
			latest = d
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := b.ctx
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	for _, c := range live {
		stampRecordTTL(ctx, c.args)
	}
	if len(live) == 1 {
		c := live[0]
		v, err := run(ctx, b.client, c.script, c.keys, c.args)
		c.done <- result{v: v, err: err}
		return
	}
	cmds := make([]*redis.Cmd, len(live))
	pipe := b.client.Pipeline()
	for i, c := range live {
		cmds[i] = pipe.EvalSha(ctx, c.script.sha, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	var again []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 { // the server lost the script: EVAL loads it again
		pipe = b.client.Pipeline()
		for _, i := range again {
			rearm(live[i].args)
			cmds[i] = pipe.Eval(ctx, live[i].script.src, live[i].keys, live[i].args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	for i, c := range live {
		v, err := cmds[i].Result()
		if errors.Is(err, context.Canceled) && b.ctx.Err() != nil {
			err = core.ErrClosed
		}
		c.done <- result{v: v, err: err}
	}
}
