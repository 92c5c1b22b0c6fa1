package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"weak"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/internal/ratelog"
)

// storeName is Event.Store in the store's events.
const storeName = "redisstore"

// WithObserver makes the store report its events to obs (see
// core.Observer): script loads (core.EventScriptLoad), redirects
// (EventRedirect), topology reloads (EventTopologyReload), the undoing of
// operations whose callers gave up (EventCompensation, with the error when
// the undo failed), and failures no caller saw (EventStoreFailure, with the
// real cause where callers saw only their deadline): a call that failed
// after its caller gave up, and each dial that failed (see New). Events
// come from the store's goroutines and the client's. Given several times,
// it reports to each. obs must not be nil (an error of New). Default:
// none.
func WithObserver(obs core.Observer) Option {
	return func(c *config) {
		if obs == nil {
			c.nilOption = "WithObserver(nil)"
			return
		}
		c.obs = core.JoinObservers(c.obs, obs)
	}
}

// WithLogger makes the store log to logger, at most about one line per
// second per cause with a count of the rest: failed dials and calls that
// failed after their caller gave up (warning: the real cause, where the
// caller's Limiter logged only its timeout), undos that failed (warning);
// at debug level, script loads, redirects, topology reloads and undos. logger must not be nil (an error
// of New): to log nothing, pass slog.New(slog.DiscardHandler). Default:
// slog.Default(), read when a line is written.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) {
		if logger == nil {
			c.nilOption = "WithLogger(nil): to log nothing, pass slog.New(slog.DiscardHandler)"
			return
		}
		c.logger = logger
	}
}

// event reports an event of kind on the node at addr (count of them; err,
// its cause) to the observers and the log.
func (s *Store) event(ctx context.Context, kind core.EventKind, addr string, count int64, err error) {
	s.eventMsg(ctx, kind, addr, count, err, "")
}

// eventMsg is event, logged with msg when not "".
func (s *Store) eventMsg(ctx context.Context, kind core.EventKind, addr string, count int64, err error, msg string) {
	s.eventAt(ctx, kind, addr, count, err, msg, -1)
}

// eventAt is eventMsg, logged at level when it is not -1 (the kind's).
func (s *Store) eventAt(ctx context.Context, kind core.EventKind, addr string, count int64, err error, msg string, at slog.Level) {
	if s.obs != nil {
		e := core.Event{Kind: kind, Store: storeName, Part: addr, Count: count, Err: err}
		s.obs.ObserveEvent(ctx, &e)
	}
	level, defaultMsg := slog.LevelDebug, ""
	switch kind {
	case core.EventStoreFailure:
		level, defaultMsg = slog.LevelWarn, "redisstore: a call failed after its caller gave up at its deadline"
	case core.EventCompensation:
		defaultMsg = "redisstore: undid an operation whose caller gave up"
		if err != nil {
			// Failed, or could not learn whether it was needed: Redis did
			// not answer within the grace. (The operation may have done
			// nothing: a script that runs after its deadline refuses.)
			level, defaultMsg = slog.LevelWarn, "redisstore: could not undo, or learn whether to undo, an operation whose caller gave up: if it changed its key, the key keeps the change"
		}
	case core.EventScriptLoad:
		defaultMsg = "redisstore: loaded the script, which the server had lost"
	case core.EventRedirect:
		defaultMsg = "redisstore: sent again operations a node refused without running them"
	case core.EventTopologyReload:
		defaultMsg = "redisstore: reloaded the cluster's topology"
	}
	if msg == "" {
		msg = defaultMsg
	}
	if at != -1 {
		level = at
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 2)
	if addr != "" {
		attrs = append(attrs, slog.String("part", addr))
	}
	cause := ""
	if err != nil {
		cause = ratelog.Cause(err)
		attrs = append(attrs, slog.String("error", cause))
	}
	s.log.Log(ctx, kind.String()+" "+addr+" "+cause, count, level, msg, attrs...)
}

// dialFailed reports a dial to addr that failed with err: to the
// observers always, and to the log as a warning when w's client retries
// its dials (go-redis's default), so that callers see only their deadline
// and this line is where the real cause shows. A client that dials once
// (DialerRetries: 1, as the package doc recommends) hands the refusal to
// the caller, whose Limiter logs it: the store's line of the same failure
// would only double the outage's log, and is at debug level.
func (s *Store) dialFailed(w dialWatch, err error) {
	level := slog.LevelDebug
	if w.retries {
		level = slog.LevelWarn
	}
	s.eventAt(context.Background(), core.EventStoreFailure, w.addr, 1, err, "redisstore: could not connect to Redis", level)
}

// isContextErr reports whether err is a context's end: a deadline or a
// cancellation says nothing of the cause.
func isContextErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// hookable is a go-redis client that takes hooks: *redis.Client (the
// failover client's type too), and a Cluster's node clients.
type hookable interface{ AddHook(redis.Hook) }

// dialWatch is a go-redis hook that reports each dial that fails
// (EventStoreFailure): while go-redis retries a dial, the callers waiting
// on it see only their deadline, and this is where the real cause shows.
// go-redis cannot remove a hook, and a client often outlives the stores
// made on it (one per tenant, a new one at each reload): the hook holds
// its store weakly, so that a store no one uses any more is collected,
// leaving behind only this small value in the client's hooks (a store
// collected unclosed has no one left to report to).
type dialWatch struct {
	s       weak.Pointer[Store]
	addr    string // the lane's
	retries bool   // the client dials more than once per connection (see dialFailed)
}

// retriesDials reports whether c dials more than once before it fails a
// connection: go-redis's default, DialerRetries 5.
func retriesDials(c Client) bool {
	if rc, ok := c.(*redis.Client); ok {
		return rc.Options().DialerRetries > 1
	}
	return true
}

func (w dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil || isContextErr(err) {
			return conn, err
		}
		if s := w.s.Value(); s != nil && !s.closed.Load() {
			s.dialFailed(w, err)
		}
		return conn, err
	}
}

func (dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
