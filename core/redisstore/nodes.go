package redisstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
)

// Nodes. On a Redis Cluster every key of a decision lives on the master
// that owns its hash slot. The store sends each operation to that master
// itself, in pipelines of that master's operations only (a lane per
// master), so that a master that fails or hangs holds up only the
// operations for its own keys; and it tells the Limiter which master holds
// a key (Part, core.Partitioned), so that each master has a circuit
// breaker of its own. A failed master costs the keys it owns, not the
// cluster.
//
// When a master fails, the cluster promotes one of its replicas; until
// go-redis reloads the cluster's topology, it still sends that master's
// keys to the dead one (a dead node sends no MOVED; go-redis reloads on its
// own only every ClusterStateReloadInterval, a minute by default). So
// after a transport failure on a master the store has go-redis reload the
// topology every reloadEvery, for as long as failures go on and
// reloadFor after: the promoted replica takes the keys over within
// reloadEvery of its promotion, under a breaker of its own, which starts
// closed.
//
// Other clients (a single Redis, Sentinel's failover client, a Ring) have
// one lane and one breaker: a Sentinel failover moves the whole store.

const (
	reloadEvery = 250 * time.Millisecond
	reloadFor   = 30 * time.Second
)

// A lane is the queue of one node: its operations are pipelined together,
// with client (the node's own, on a Cluster), but for one sent inline by
// its caller when nothing else is in flight (inline.go).
type lane struct {
	addr   string
	client Client
	batch  *batcher // nil: unbatched

	inflight atomic.Int64 // Apply's calls not yet done with (see call.leave)
	honours  bool         // client bounds reads by a context's deadline: calls may be sent inline
	id       int64        // the lane's identity in receipts: random, in [1, 2^52)
	seq      atomic.Int64 // the number of the lane's last receipt
}

// lanes routes operations to nodes.
type lanes struct {
	s       *Store
	cluster *redis.ClusterClient // nil: one lane
	one     *lane

	mu     sync.Mutex
	byAddr atomic.Pointer[map[string]*lane] // copied on write

	// Topology reloads after a failure (see the doc above).
	failedAt  atomic.Int64 // Unix ns of the last transport failure on a node
	reloading atomic.Bool
	stop      chan struct{}
}

func newLanes(s *Store, client Client, size, workers int) *lanes {
	ls := &lanes{s: s, stop: make(chan struct{})}
	ls.cluster, _ = client.(*redis.ClusterClient)
	ls.one = ls.newLane("", client, size, workers)
	return ls
}

func (ls *lanes) newLane(addr string, client Client, size, workers int) *lane {
	l := &lane{addr: addr, client: client, honours: honoursDeadlines(client), id: 1 + rand.Int64N(1<<52-1)}
	if h, ok := client.(hookable); ok && client != Client(ls.cluster) {
		h.AddHook(dialWatch{weak.Make(ls.s), addr, retriesDials(client)})
	}
	if workers > 0 {
		l.batch = newBatcher(ls.s, client, addr, size, workers)
	}
	return l
}

// of returns the lane of the node serving stateKey.
func (ls *lanes) of(stateKey string) *lane {
	if ls.cluster == nil {
		return ls.one
	}
	node, err := ls.cluster.MasterForKey(context.Background(), stateKey)
	if err != nil {
		return ls.one // the cluster client routes it, and fails it if it must
	}
	addr := node.Options().Addr
	if m := ls.byAddr.Load(); m != nil {
		if l, ok := (*m)[addr]; ok {
			return l
		}
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	old := ls.byAddr.Load()
	if old != nil {
		if l, ok := (*old)[addr]; ok {
			return l
		}
	}
	m := make(map[string]*lane, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	var size, workers int
	if b := ls.one.batch; b != nil {
		size, workers = b.size, b.workers
	}
	l := ls.newLane(addr, node, size, workers)
	m[addr] = l
	ls.byAddr.Store(&m)
	return l
}

// part returns the address of the node serving stateKey, "" when the store
// is not on a Cluster.
func (ls *lanes) part(stateKey string) string {
	if ls.cluster == nil {
		return ""
	}
	node, err := ls.cluster.MasterForKey(context.Background(), stateKey)
	if err != nil {
		return ""
	}
	return node.Options().Addr
}

// failed records a transport failure (no reply: a refused or broken
// connection, a timeout) on a node's client, and starts reloading the
// cluster's topology.
func (ls *lanes) failed(client Client) {
	if ls.cluster == nil {
		return
	}
	ls.failedAt.Store(time.Now().UnixNano())
	if ls.reloading.CompareAndSwap(false, true) {
		go ls.reload()
	}
}

// reload has go-redis reload the cluster's topology every reloadEvery
// until reloadFor has passed since the last failure.
func (ls *lanes) reload() {
	t := time.NewTicker(reloadEvery)
	defer t.Stop()
	for {
		ls.cluster.ReloadState(context.Background())
		ls.s.event(context.Background(), core.EventTopologyReload, "", 1, nil)
		select {
		case <-ls.stop:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, ls.failedAt.Load())) > reloadFor {
			ls.reloading.Store(false)
			// A failure recorded since the load above starts another loop.
			if time.Since(time.Unix(0, ls.failedAt.Load())) > reloadFor || !ls.reloading.CompareAndSwap(false, true) {
				return
			}
		}
	}
}

// close stops every lane's workers and the reloading.
func (ls *lanes) close() {
	close(ls.stop)
	if ls.one.batch != nil {
		ls.one.batch.close()
	}
	if m := ls.byAddr.Load(); m != nil {
		for _, l := range *m {
			if l.batch != nil {
				l.batch.close()
			}
		}
	}
}

// notRun reports whether err is a reply by which Redis refused a command
// without running it, so that sending it again cannot apply it twice:
// a redirect (MOVED, ASK), a cluster or replica in transition (TRYAGAIN,
// CLUSTERDOWN, LOADING, READONLY, MASTERDOWN), a write refused for want of
// replicas (NOREPLICAS), a server busy with another script (BUSY), or a
// script it does not have (NOSCRIPT).
func notRun(err error) bool {
	if err == nil {
		return false // before rerr, which escapes to errors.As: no allocation per reply
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range notRunPrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

var notRunPrefixes = [...]string{"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "READONLY",
	"MASTERDOWN", "NOREPLICAS", "BUSY ", "NOSCRIPT"}

// transport reports whether err is a failure to get a reply at all (not a
// reply that is an error): such failures on a Cluster's node start
// topology reloads.
func transport(err error) bool {
	if err == nil {
		return false // before rerr, which escapes to errors.As: no allocation per reply
	}
	var rerr redis.Error
	return !errors.As(err, &rerr) && !errors.Is(err, context.Canceled)
}
