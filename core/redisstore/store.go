package redisstore

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
)

//go:embed apply.lua
var applyLua string

// applySHA is the SHA-1 of applyLua, the name EVALSHA runs it by.
var applySHA = func() string {
	sum := sha1.Sum([]byte(applyLua))
	return hex.EncodeToString(sum[:])
}()

// Client is the part of a go-redis client the store uses. *redis.Client,
// *redis.ClusterClient, *redis.Ring and the client of
// redis.NewFailoverClient satisfy it.
//
// Set ContextTimeoutEnabled in the client's options when batching is off,
// so that a context's deadline (such as the Limiter's per-call timeout)
// bounds a call to a server that hangs; without it go-redis waits for its
// ReadTimeout (3s by default). With batching on the store honours the
// context itself.
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

	opBase string // random per store: operation ids are opBase + a counter
	opSeq  atomic.Uint64

	batch  *batcher // nil when batching is off
	closed atomic.Bool

	// The ARGV of the limits of an op without logs, boxed once (see
	// limitArgs), by the address and length of op.Limits: a Limiter passes
	// the same slice to every call. At most maxArgCache entries.
	argCache sync.Map // argKey → *argEntry
	argCount atomic.Int64
	once     sync.Once
}

// Defaults of the options.
const (
	// DefaultPrefix is the default prefix of every key.
	DefaultPrefix = "tollgate:"
	// DefaultMargin is the default time a key outlives the full
	// replenishment of its limits.
	DefaultMargin = time.Second
	// DefaultOpTTL is how long, by default, the reply of a state-changing
	// operation is kept so that a retried command returns it instead of
	// charging again.
	DefaultOpTTL = 5 * time.Second
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
	prefix           string
	margin, opTTL    time.Duration
	maxKeyLen        int
	batch, batchSize int
}

// WithPrefix sets the prefix of every key the store writes. It must not
// contain '{' or '}' (the store puts the hash tag right after it).
// Default: DefaultPrefix.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithMargin sets how long a key outlives the full replenishment of its
// limits, rounded up to whole milliseconds: it covers the difference
// between the clock that computed the replenishment and the server's
// expiry clock (the same one under the default Redis TIME; the callers'
// clocks under core.WithClock, which must then be close to the server's).
// Default: DefaultMargin.
func WithMargin(d time.Duration) Option { return func(c *config) { c.margin = d } }

// WithOpTTL sets how long the reply of a state-changing operation is kept
// under its operation id, so that a command that go-redis retries after a
// timeout returns the first reply instead of charging twice (see the
// package doc). Make it longer than the client's retry window: with
// ContextTimeoutEnabled and a deadline, the deadline; without, about
// MaxRetries × (ReadTimeout + MaxRetryBackoff). 0 disables the records: a
// retried command may then charge twice. Default: DefaultOpTTL.
func WithOpTTL(d time.Duration) Option { return func(c *config) { c.opTTL = d } }

// WithMaxKeyLen makes user keys longer than n bytes be replaced, in Redis
// key names, by their SHA-256. Default: DefaultMaxKeyLen.
func WithMaxKeyLen(n int) Option { return func(c *config) { c.maxKeyLen = n } }

// WithBatching coalesces concurrent operations into pipelines: up to size
// operations per pipeline, workers pipelines in flight at once. An
// operation is sent as soon as a worker is free, with whatever others are
// waiting then (no added wait), so a lone caller pays one channel hand-off
// and a busy store sends many operations per round trip. workers ≤ 0 turns
// batching off: each operation is then one EVALSHA from the calling
// goroutine. Default: off.
func WithBatching(size, workers int) Option {
	return func(c *config) { c.batchSize, c.batch = size, workers }
}

// New returns a store that keeps its state in client's Redis. It does no I/O:
// the script is loaded on first use (and again whenever Redis has lost it).
// Close stops the batching workers, if any; it does not close client.
func New(client Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrConfig)
	}
	c := config{prefix: DefaultPrefix, margin: DefaultMargin, opTTL: DefaultOpTTL, maxKeyLen: DefaultMaxKeyLen, batchSize: DefaultBatchSize}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case strings.ContainsAny(c.prefix, "{}"):
		return nil, fmt.Errorf("%w: prefix %q contains a brace", ErrConfig, c.prefix)
	case c.margin < 0:
		return nil, fmt.Errorf("%w: negative margin %v", ErrConfig, c.margin)
	case c.opTTL < 0:
		return nil, fmt.Errorf("%w: negative operation TTL %v", ErrConfig, c.opTTL)
	case c.maxKeyLen < 1:
		return nil, fmt.Errorf("%w: maximum key length %d", ErrConfig, c.maxKeyLen)
	case c.batch > 0 && c.batchSize < 1:
		return nil, fmt.Errorf("%w: batch size %d", ErrConfig, c.batchSize)
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // never fails (crypto/rand panics instead)
	s := &Store{
		client:    client,
		prefix:    c.prefix,
		maxKeyLen: c.maxKeyLen,
		margin:    ceilMillis(c.margin),
		opTTL:     ceilMillis(c.opTTL),
		opBase:    hex.EncodeToString(seed[:]) + ".",
	}
	if c.batch > 0 {
		s.batch = newBatcher(client, c.batchSize, c.batch)
	}
	return s, nil
}

func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Apply implements core.Store: it runs op as one script, atomically, in one
// round trip whatever the number of limits. Time is op.Now when set, else
// the Redis server's TIME.
func (s *Store) Apply(ctx context.Context, op core.Op) (core.Decision, error) {
	if s.closed.Load() {
		return core.Decision{}, fmt.Errorf("redisstore: %s: %w", op.Kind, core.ErrClosed)
	}
	if err := op.Validate(); err != nil {
		return core.Decision{}, err
	}
	keys, args := s.command(&op)
	var reply any
	var err error
	if s.batch != nil {
		reply, err = s.batch.do(ctx, keys, args)
	} else {
		reply, err = run(ctx, s.client, keys, args)
	}
	if err != nil {
		return core.Decision{}, fmt.Errorf("redisstore: %s %.64q: %w", op.Kind, op.Key, err)
	}
	d, err := decode(&op, reply)
	if err != nil {
		return core.Decision{}, fmt.Errorf("redisstore: %s %.64q: %w", op.Kind, op.Key, err)
	}
	return d, nil
}

// command returns the KEYS and ARGV of the script for op (see apply.lua).
// op is valid.
func (s *Store) command(op *core.Op) (keys []string, args []any) {
	state := s.stateKey(op.Scope, op.Key)
	keys = make([]string, 1, 2+len(op.Limits))
	keys[0] = state
	args = make([]any, 7, 7+10*len(op.Limits))
	if !op.Now.IsZero() {
		args[0] = op.Now.UnixMicro()
	} else {
		args[0] = ""
	}
	args[1], args[2], args[4], args[5], args[6] = int(op.Kind), op.Cost, s.margin, int(core.DebtFactor), len(op.Limits)
	if s.opTTL > 0 && op.Kind != core.Peek {
		args[3] = s.opTTL
		keys = append(keys, state+":op:"+s.opBase+strconv.FormatUint(s.opSeq.Add(1), 36))
	} else {
		args[3] = 0
	}
	if a := s.limitArgs(op.Limits); a != nil {
		return keys, append(args, a...)
	}
	for i := range op.Limits {
		p, _ := op.Limits[i].Params() // op is valid
		logIdx := 0
		if p.Algorithm == core.SlidingLog || p.Algorithm == core.BucketedWindow {
			k := 0 // the rank of this limit among the op's limits of its layout
			for j := range i {
				if q, _ := op.Limits[j].Params(); q.Ident == p.Ident {
					k++
				}
			}
			keys = append(keys, logKey(state, p.Ident, k))
			logIdx = len(keys) // Lua's KEYS are 1-based
		}
		args = append(args, int(p.Algorithm), p.Quota, p.Capacity, p.Tick, p.PeriodTicks,
			p.Precision, p.Buckets, int64(p.Ident>>32), int64(p.Ident&math.MaxUint32), logIdx)
	}
	return keys, args
}

// maxArgCache bounds the limit layouts whose ARGV a Store keeps (a caller
// building a new slice of limits per call would otherwise grow the cache).
const maxArgCache = 1024

type argKey struct {
	p *core.Limit
	n int
}

type argEntry struct {
	limits []core.Limit // a copy: the slice's contents when the entry was made
	args   []any        // nil: the limits have a log (its KEYS index varies)
}

// limitArgs returns the ARGV of limits, boxed once and shared (callers
// append it, never change it), or nil when they must be formatted: limits
// with a log, or not cached. A cached entry is used only while the slice
// still holds the limits it was made for.
func (s *Store) limitArgs(limits []core.Limit) []any {
	k := argKey{unsafe.SliceData(limits), len(limits)}
	if v, ok := s.argCache.Load(k); ok {
		e := v.(*argEntry)
		for i := range limits {
			if limits[i] != e.limits[i] {
				return nil
			}
		}
		return e.args
	}
	if s.argCount.Load() >= maxArgCache {
		return nil
	}
	e := &argEntry{limits: append([]core.Limit(nil), limits...)}
	args := make([]any, 0, 10*len(limits))
	for i := range limits {
		p, _ := limits[i].Params() // the op is valid
		if p.Algorithm == core.SlidingLog || p.Algorithm == core.BucketedWindow {
			args = nil
			break
		}
		args = append(args, int(p.Algorithm), p.Quota, p.Capacity, p.Tick, p.PeriodTicks,
			p.Precision, p.Buckets, int64(p.Ident>>32), int64(p.Ident&math.MaxUint32), 0)
	}
	e.args = args
	if _, loaded := s.argCache.LoadOrStore(k, e); !loaded {
		s.argCount.Add(1)
	}
	return args
}

// run runs the script with EVALSHA, and with EVAL (which loads it) when
// the server does not have it.
func run(ctx context.Context, c Client, keys []string, args []any) (any, error) {
	v, err := c.EvalSha(ctx, applySHA, keys, args...).Result()
	if err != nil && isNoScript(err) {
		v, err = c.Eval(ctx, applyLua, keys, args...).Result()
	}
	return v, err
}

func isNoScript(err error) bool { return redis.HasErrorPrefix(err, "NOSCRIPT") }

// decode builds the Decision of op from the script's reply: 4 integers per
// limit (allowed, retry or delay µs, remaining, reset µs).
func decode(op *core.Op, reply any) (core.Decision, error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) != 4*len(op.Limits) {
		return core.Decision{}, fmt.Errorf("%w: %T of length %d for %d limits", ErrReply, reply, len(vals), len(op.Limits))
	}
	ints := make([]int64, len(vals))
	allowed := true
	for i, v := range vals {
		if ints[i], ok = v.(int64); !ok {
			return core.Decision{}, fmt.Errorf("%w: element %d is %T", ErrReply, i, v)
		}
		if i%4 == 0 {
			allowed = allowed && ints[i] == 1
		}
	}
	ls := make([]core.LimitState, len(op.Limits))
	for i := range ls {
		x := ints[4*i : 4*i+4]
		s := core.LimitState{Limit: op.Limits[i], Allowed: x[0] == 1, Remaining: x[2], ResetAfter: micros(x[3])}
		switch {
		case !s.Allowed:
			s.RetryAfter = micros(x[1])
		case allowed: // nothing is queued unless every limit admits
			s.Delay = micros(x[1])
		}
		ls[i] = s
	}
	return core.Combine(op, ls), nil
}

// micros converts µs to a Duration; a negative value, or one too long for
// a Duration, means core.Never (as in core).
func micros(us int64) time.Duration {
	if us < 0 || us > int64(core.Never/time.Microsecond) {
		return core.Never
	}
	return time.Duration(us) * time.Microsecond
}

// Close stops the batching workers, if any, failing the operations still
// waiting with core.ErrClosed. It does not close the client. Apply after
// Close returns an error wrapping core.ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		if s.batch != nil {
			s.batch.close()
		}
	})
	return nil
}

var _ core.Store = (*Store)(nil)
