package redisstore

import (
	"cmp"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Warming up. go-redis dials its connections when calls first need them,
// and Redis compiles a script when it is first sent: the first moments of
// load on a fresh client used to pay both inside the callers' deadlines
// (the Limiter's 100 ms), and a healthy Redis failed decisions while the
// pool filled and every caller sent the script's text after NOSCRIPT. So
// New dials connections and loads the generic script before it returns
// (warm, bounded by WithWarmup), and a script specialized to a plan is
// loaded in the background by one SCRIPT LOAD, the plan's calls running
// the generic script, which decides alike, until it is there (useScript).

// Defaults of WithWarmup.
const (
	// DefaultWarmupConns is how many connections New dials per node by
	// default: the batching workers' and as many again for callers that
	// send inline.
	DefaultWarmupConns = 2 * DefaultBatchWorkers
	// DefaultWarmupTimeout is the longest New waits for the warm-up by
	// default.
	DefaultWarmupTimeout = time.Second
)

// WithWarmup makes New dial conns connections to each node (each master of
// a Cluster) in parallel, with a PING each, and load the store's generic
// script there (and its twin, which runs a batch's operations in one
// command: see WithCombinedScripts), waiting at most timeout: so that the
// first decisions on a healthy Redis find their connections dialled and
// their script loaded, and fail none of their deadlines. A Redis that is
// down, or slow to answer, costs New at most timeout and never fails it:
// the calls dial and load as they go, as without a warm-up. The
// connections stay in the client's pool as long as its options keep idle
// connections (go-redis's ConnMaxIdleTime, 30 minutes by default).
// WithWarmup(0, 0) turns the warm-up off (New then does no I/O); conns
// must be at most the client's PoolSize to be kept. Default:
// DefaultWarmupConns and DefaultWarmupTimeout.
func WithWarmup(conns int, timeout time.Duration) Option {
	return func(c *config) { c.warmConns, c.warmFor = conns, timeout }
}

// warm dials conns connections to each node of client and loads the
// generic script there, and its twin when twin (never for a Cluster, whose
// masters run none: Store.combines), within timeout; failures are left to
// the calls.
func warm(client Client, conns int, timeout time.Duration, twin bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	node := func(ctx context.Context, c Client) error {
		// Each connection is held until all are dialled, so that they are
		// n distinct ones, and then returned to the pool, idle.
		// The first connection, with the script, alone: go-redis settles
		// what it negotiates with the server (options its connections
		// share) on it, before the others dial at once.
		pipe := c.Pipeline()
		ping := pipe.Ping(ctx)
		load := pipe.ScriptLoad(ctx, generic.src)
		if twin { // (a failure here is EVAL's to mend, as for any script)
			pipe.ScriptLoad(ctx, generic.twin().src)
		}
		_, _ = pipe.Exec(ctx)
		if err := cmp.Or(ping.Err(), load.Err()); err != nil {
			return err // down, or too slow: the calls will dial
		}
		rc, _ := c.(*redis.Client)
		held := make([]*redis.Conn, conns)
		var wg sync.WaitGroup
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if rc != nil {
					held[i] = rc.Conn()
					_ = held[i].Ping(ctx).Err()
				} else {
					p := c.Pipeline()
					p.Ping(ctx)
					_, _ = p.Exec(ctx)
				}
			}()
		}
		wg.Wait()
		for _, cn := range held {
			if cn != nil {
				_ = cn.Close()
			}
		}
		return nil
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return node(ctx, m) })
		return
	}
	_ = node(ctx, client)
}

// checkWaitTicks warns when a node ends a timed-out WAIT later than
// WithWait's timeout asks: Redis checks blocked clients' timeouts on its
// cron, every 1000/hz ms (100 ms at the default hz 10), so a WAIT for a
// replica that is gone lasts until the tick after its timeout, which may
// be past the Limiter's deadline. It asks each node (each master of a
// Cluster) its hz with INFO server, within timeout; a node that does not
// answer is left alone.
func (s *Store) checkWaitTicks(wait, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	check := func(ctx context.Context, c Client) error {
		pipe := c.Pipeline()
		cmd := pipe.Info(ctx, "server")
		_, _ = pipe.Exec(ctx)
		info, err := cmd.Result()
		if err != nil {
			return nil
		}
		hz := infoInt(info, "hz")
		if hz <= 0 {
			return nil
		}
		tick := time.Second / time.Duration(hz)
		if tick <= wait {
			return nil
		}
		addr := ""
		if rc, ok := c.(*redis.Client); ok {
			addr = rc.Options().Addr
		}
		s.log.Log(ctx, "wait ticks "+addr, 1, slog.LevelWarn,
			"redisstore: WithWait's timeout is shorter than the server's cron tick: a WAIT for a replica that is gone lasts until the next tick; set hz higher (Redis's hz 100 is a 10 ms tick)",
			slog.String("addr", addr), slog.Duration("wait", wait), slog.Int("hz", hz), slog.Duration("tick", tick))
		return nil
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return check(ctx, m) })
		return
	}
	_ = check(ctx, s.client)
}

// infoInt returns the integer value of field in the text of an INFO reply
// ("field:value" lines), or 0.
func infoInt(info, field string) int {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// useScript returns the script a call of pp runs: its specialized script
// once the server has it, else the generic one (which decides alike),
// while one SCRIPT LOAD of the specialized script runs in the background.
// A script the server loses later (a restart, SCRIPT FLUSH) is sent again
// with EVAL after NOSCRIPT, as every script is (run).
func (s *Store) useScript(pp *prepared) *script {
	sc := pp.script
	if sc == generic || sc.loaded.Load() {
		return sc
	}
	if sc.loading.CompareAndSwap(false, true) && !s.closed.Load() {
		go s.loadScript(sc)
	}
	return generic
}

// loadScript loads sc on every node of the store (every master of a
// Cluster) with SCRIPT LOAD, bounded by DefaultWarmupTimeout; on a
// failure the next call of its plan tries again.
func (s *Store) loadScript(sc *script) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultWarmupTimeout)
	defer cancel()
	load := func(ctx context.Context, c Client) error {
		pipe := c.Pipeline()
		cmd := pipe.ScriptLoad(ctx, sc.src)
		if s.combines(c) { // (its failure is EVAL's to mend)
			pipe.ScriptLoad(ctx, sc.twin().src)
		}
		_, _ = pipe.Exec(ctx)
		return cmd.Err()
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return load(ctx, m) })
	} else {
		err = load(ctx, s.client)
	}
	if err == nil {
		sc.loaded.Store(true)
	}
	sc.loading.Store(false)
}
