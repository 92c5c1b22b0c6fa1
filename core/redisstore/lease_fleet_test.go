package redisstore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease"
)

// The leased fleet: processes of this test binary (TestLeasedFleetChild)
// each run 16 callers on one key through a lease.Store over the Redis
// store, at a demand the parent sets, and print every admission: the
// instants (Unix µs) just before the call and just after it. An
// admission whose two instants fall in one window was charged in that
// window; one that straddles a boundary is counted apart (a round trip
// in flight across it). The oracles of lease_oracle_test.go check the
// admissions against each algorithm's bound.

const fleetLimit = 2000 // per second; the rate of the buckets

// fleetAlgs are the algorithms leases support (core/lease, doc.go): the
// fleet runs each.
var fleetAlgs = []string{"fixed-window", "sliding-window", "bucketed-window", "token-bucket", "gcra"}

// fleetLimitOf returns the fleet's limit of algorithm alg.
func fleetLimitOf(alg string) core.Limit {
	l := core.PerSecond(fleetLimit)
	switch alg {
	case "fixed-window":
		return l.WithAlgorithm(core.FixedWindow)
	case "sliding-window":
		return l.WithAlgorithm(core.SlidingWindow)
	case "bucketed-window":
		return l.WithAlgorithm(core.BucketedWindow).WithPrecision(100 * time.Millisecond)
	case "token-bucket":
		return l.WithAlgorithm(core.TokenBucket).WithBurst(fleetLimit / 10)
	case "gcra":
		return l.WithAlgorithm(core.GCRA).WithBurst(fleetLimit / 10)
	}
	panic("no fleet limit of algorithm " + alg)
}

// TestLeasedFleetChild is one process of the fleet; it runs only when
// started by a fleet test.
func TestLeasedFleetChild(t *testing.T) {
	if os.Getenv("TOLLGATE_LEASE_CHILD") != "1" {
		t.Skip("a process of TestLeasedFleet")
	}
	addr, prefix, alg := os.Getenv("TOLLGATE_REDIS_ADDR"), os.Getenv("LEASE_PREFIX"), os.Getenv("LEASE_ALG")
	rate, _ := strconv.ParseFloat(os.Getenv("LEASE_RATE"), 64) // requests per second, all callers
	dur, _ := time.ParseDuration(os.Getenv("LEASE_FOR"))
	var c Client
	if cl := os.Getenv("LEASE_CLUSTER"); cl != "" {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(cl, ","), ContextTimeoutEnabled: true})
	} else {
		c = redis.NewClient(clientOptions(addr))
	}
	rs, err := New(c, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	st, err := lease.New(rs)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := core.New(st, fleetLimitOf(alg), core.WithName("fleet"))
	if err != nil {
		t.Fatal(err)
	}
	var cur atomic.Pointer[core.Limiter]
	cur.Store(lim)
	// Ready (the store warmed up): the parent answers with the start, Unix
	// µs, once every process is.
	fmt.Println("R")
	var start int64
	if _, err := fmt.Fscan(os.Stdin, &start); err != nil {
		t.Fatalf("reading the start: %v", err)
	}
	time.Sleep(time.Until(time.UnixMicro(start)))
	end := time.Now().Add(dur)
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	if os.Getenv("LEASE_RELOAD") == "1" {
		// SIGUSR1 reloads the rules as a rules.Set does: a new Limiter of
		// the same name (so the same shared state) with half the limit,
		// then Flush gives back what the old one's leases held.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGUSR1)
		go func() {
			<-sig
			half, err := core.New(st, core.PerSecond(fleetLimit/2).WithAlgorithm(core.FixedWindow), core.WithName("fleet"))
			if err != nil {
				panic(err)
			}
			cur.Store(half)
			st.Flush()
		}()
	}
	var wg sync.WaitGroup
	const callers = 16
	gap := time.Duration(float64(time.Second) * callers / rate)
	for i := range callers {
		wg.Go(func() {
			next := time.Now().Add(gap * time.Duration(i) / callers)
			for time.Now().Before(end) {
				time.Sleep(time.Until(next))
				next = next.Add(gap)
				t0 := time.Now().UnixMicro()
				d, err := cur.Load().Allow(context.Background(), "hot")
				t1 := time.Now().UnixMicro()
				mu.Lock()
				switch {
				case err != nil:
					fmt.Fprintf(out, "E %d %d %q\n", t0, t1, err.Error())
				case d.Allowed:
					fmt.Fprintf(out, "A %d %d\n", t0, t1)
				default:
					fmt.Fprintf(out, "D %d\n", t0)
				}
				out.Flush() // a SIGKILLed process loses no admission it made
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st.Close()
	s := st.Stats()
	fmt.Fprintf(out, "S %d %d %d\n", s.Local, s.Reservations, s.Waits)
	out.Flush()
}

// fleetProc is one process of a fleet and what it printed.
type fleetProc struct {
	cmd      *exec.Cmd
	out      strings.Builder
	errOut   strings.Builder // its logs: shown when it fails
	admitted [][2]int64      // (before, after) µs
	asked    int
	errs     int
	killed   bool
	local    int64
	trips    int64
}

// A fleetRun says how to run a fleet.
type fleetRun struct {
	alg     string
	demand  []float64 // each process's requests per second
	dur     time.Duration
	addr    string                   // the Redis; "": TOLLGATE_REDIS_ADDR
	cluster string                   // the cluster's masters, comma-separated, instead
	midway  func(procs []*fleetProc) // called half way through, if set
	prefix  string                   // the store's key prefix; "": a fresh one
	reload  bool                     // SIGUSR1 halves a process's limit
	// aligned starts the run 250ms before a second's boundary, so that it
	// holds ⌊dur − 250ms⌋ whole seconds (fixed windows).
	aligned bool
}

// runFleet runs processes of the given demands on one key of limit alg
// for dur and returns them once they are done (a process killed midway
// may have failed).
func runFleet(t *testing.T, r fleetRun) []*fleetProc {
	t.Helper()
	alg, demand, dur := r.alg, r.demand, r.dur
	addr := r.addr
	if addr == "" && r.cluster == "" {
		addr = env(t, "TOLLGATE_REDIS_ADDR")
	}
	prefix := r.prefix
	if prefix == "" {
		prefix = testPrefix()
	}
	procs := make([]*fleetProc, len(demand))
	starts := make([]io.WriteCloser, len(demand))
	outs := make([]*bufio.Reader, len(demand))
	for i, rate := range demand {
		p := &fleetProc{cmd: exec.Command(os.Args[0], "-test.run=^TestLeasedFleetChild$", "-test.v=false")}
		p.cmd.Env = append(os.Environ(), "TOLLGATE_LEASE_CHILD=1", "TOLLGATE_REDIS_ADDR="+addr, "LEASE_PREFIX="+prefix,
			"LEASE_ALG="+alg, fmt.Sprintf("LEASE_RATE=%g", rate),
			"LEASE_FOR="+dur.String(), "LEASE_CLUSTER="+r.cluster, fmt.Sprintf("LEASE_RELOAD=%d", map[bool]int{true: 1}[r.reload]))
		p.cmd.Stderr = &p.errOut
		in, err := p.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i], starts[i], outs[i] = p, in, bufio.NewReader(out)
		// Whatever ends the test (a Fatal included), no process outlives
		// it: a stopped one is resumed to be killed.
		t.Cleanup(func() {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Signal(syscall.SIGCONT)
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		})
	}
	// Once every process is ready (started, its store warmed up: slowly
	// under the race detector), they start together, 100ms later; an
	// aligned run, 250ms before a second's boundary.
	for i, p := range procs {
		if line, err := outs[i].ReadString('\n'); line != "R\n" {
			t.Fatalf("fleet process %d did not get ready (%q, %v):\n%s", i, line, err, p.errOut.String())
		}
	}
	start := time.Now().Add(100 * time.Millisecond)
	if r.aligned {
		start = start.Add(250*time.Millisecond - 1).Truncate(time.Second).Add(time.Second - 250*time.Millisecond)
	}
	copied := make([]chan struct{}, len(procs))
	for i, p := range procs {
		fmt.Fprintln(starts[i], start.UnixMicro())
		starts[i].Close()
		copied[i] = make(chan struct{})
		go func() {
			io.Copy(&p.out, outs[i])
			close(copied[i])
		}()
	}
	if r.midway != nil {
		time.Sleep(time.Until(start.Add(dur / 2)))
		r.midway(procs)
	}
	for i, p := range procs {
		<-copied[i] // all read before Wait closes the pipe
		err := p.cmd.Wait()
		if err != nil && !p.killed {
			out := p.out.String()
			if len(out) > 2000 {
				out = "..." + out[len(out)-2000:]
			}
			t.Fatalf("fleet process %d: %v\nits stderr:\n%s\nthe end of its stdout:\n%s", i, err, p.errOut.String(), out)
		}
		for _, line := range strings.Split(p.out.String(), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || len(f) < map[string]int{"A": 3, "S": 4}[f[0]] {
				continue // nothing, or cut short by a kill
			}
			n := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
			switch f[0] {
			case "A":
				p.admitted = append(p.admitted, [2]int64{n(1), n(2)})
				p.asked++
			case "D":
				p.asked++
			case "E":
				p.asked++
				if p.errs++; p.errs <= 2 {
					t.Logf("process %d: %s", i, line)
				}
			case "S":
				p.local, p.trips = n(1), n(2)
			}
		}
	}
	return procs
}

// fleetDemands are the demands of TestLeasedFleet: each process's share of
// twice the limit.
var fleetDemands = []struct {
	name    string
	demand  []float64
	leading bool // the first process asks 70%
}{
	{"equal demand", []float64{0.25, 0.25, 0.25, 0.25}, false},
	{"one process asking 70%", []float64{0.7, 0.1, 0.1, 0.1}, true},
}

// TestLeasedFleet runs 4 processes × 16 callers on one key at twice its
// limit, for every algorithm leases support, on a real redis-server and on
// the 3-master cluster: the admissions keep the bound the algorithm's
// guarantee implies (fleetOracle); the fleet uses at least 95% of the
// limit; equal demands get equal shares (25% ± 5%), and a process asking
// 70% of the demand gets at least 60%.
func TestLeasedFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process runs of a few seconds")
	}
	const dur = 2500 * time.Millisecond // aligned: 2 whole seconds
	for _, target := range []string{"redis-server", "the 3-master cluster"} {
		t.Run(target, func(t *testing.T) {
			var cluster string
			if target == "the 3-master cluster" {
				cluster = env(t, "TOLLGATE_REDIS_CLUSTER_ADDRS")
			}
			for _, alg := range fleetAlgs {
				t.Run(alg, func(t *testing.T) {
					for _, tt := range fleetDemands {
						t.Run(tt.name, func(t *testing.T) {
							concurrentUnderRace(t)
							demand := make([]float64, len(tt.demand))
							for i, f := range tt.demand {
								demand[i] = f * 2 * fleetLimit
							}
							// Use, shares and the error rate are measured
							// on a shared machine, whose load can starve
							// one process for a while: a fleet that misses
							// them runs once more, and the test fails if
							// that one misses too. Every run must keep the
							// oracle's bound.
							for attempt := 1; ; attempt++ {
								procs := runFleet(t, fleetRun{alg: alg, demand: demand, dur: dur, cluster: cluster, aligned: true})
								fleetOracle(t, fleetLimitOf(alg), fleetCalls(procs))
								missed := checkUse(t, procs, tt.leading)
								if len(missed) == 0 {
									break
								}
								if attempt == 2 {
									for _, m := range missed {
										t.Error(m)
									}
									break
								}
								t.Logf("run %d missed (run again): %s", attempt, strings.Join(missed, "; "))
							}
						})
					}
				})
			}
		})
	}
}

// checkUse logs what a fleet at twice its limit admitted and, but under
// the race detector, returns what it missed of these: it used at least 95%
// of the limit in the whole seconds of the run (the rate of a bucket),
// answered at most 1% of its requests with errors, and shared the
// admissions as the demand: equal demands get 25% ± 5% each; when
// leading, the first process, asking 70%, gets at least 60%.
func checkUse(t *testing.T, procs []*fleetProc, leading bool) (missed []string) {
	t.Helper()
	var total, asked, errs int
	var local, trips int64
	for _, p := range procs {
		total += len(p.admitted)
		asked += p.asked
		errs += p.errs
		local += p.local
		trips += p.trips
	}
	perSecond, _ := inSpans(fleetCalls(procs), 1e6)
	full, seconds := used(perSecond)
	usedPct := 100 * float64(full) / float64(max(seconds, 1)*fleetLimit)
	shares := make([]float64, len(procs))
	for i, p := range procs {
		shares[i] = float64(len(p.admitted)) / float64(max(total, 1))
	}
	t.Logf("%d admitted, %d decided in process, %d round trips; %d errors in %d requests; %.1f%% of the limit used in %d whole seconds; shares %.3f",
		total, local, trips, errs, asked, usedPct, seconds, shares)
	if raceBuild {
		// Five processes built with the race detector on two cores time
		// out now and then, and the breaker opens: use and shares say
		// nothing then. The oracle's bounds still hold.
		return nil
	}
	if seconds == 0 {
		t.Fatal("no whole second inside the run: the test measured nothing")
	}
	if usedPct < 95 {
		missed = append(missed, fmt.Sprintf("%d admissions in %d whole seconds at a limit of %d/s: %.1f%% of the limit used, want at least 95%%", full, seconds, fleetLimit, usedPct))
	}
	// A loaded machine times a round trip out now and then (the Limiter's
	// 100ms); more than that is a fault.
	if errs > asked/100 {
		missed = append(missed, fmt.Sprintf("%d errors in %d requests, want at most 1%%", errs, asked))
	}
	if leading {
		if shares[0] < 0.60 {
			missed = append(missed, fmt.Sprintf("the process asking 70%% got %.1f%% of the admissions, want at least 60%%", 100*shares[0]))
		}
		return missed
	}
	for i, s := range shares {
		if s < 0.20 || s > 0.30 {
			missed = append(missed, fmt.Sprintf("process %d got %.1f%% of the admissions, want 25%% ± 5%%", i, 100*s))
		}
	}
	return missed
}

// windows returns the admissions of a fixed-window fleet inside each
// window, checking that none holds more than the limit.
func windows(t *testing.T, procs []*fleetProc) map[int64]int {
	t.Helper()
	per, _, _ := boundWindows(t, fleetLimitOf("fixed-window"), fleetCalls(procs))
	return per
}

// admittedPerWindow returns the admissions of procs inside each window of
// a second, unchecked (a fault's window may hold more).
func admittedPerWindow(procs []*fleetProc) map[int64]int {
	per, _ := inSpans(fleetCalls(procs), 1e6)
	return per
}

// used returns the admissions in the windows wholly inside the run (it
// covers parts of the first and last), and how many windows those are.
func used(perWindow map[int64]int) (n, windows int) {
	first, last := int64(1<<62), int64(0)
	for w := range perWindow {
		first, last = min(first, w), max(last, w)
	}
	for w := first + 1; w < last; w++ {
		n += perWindow[w]
		windows++
	}
	return n, windows
}

// concurrentUnderRace runs t beside the other fleets of its test when the
// race detector is on: only the windows' bounds are checked then (use and
// shares need the cores to themselves), and the runs, which mostly wait,
// share the cores instead of adding up their seconds.
func concurrentUnderRace(t *testing.T) {
	if raceBuild {
		t.Parallel()
	}
}

// The fleet of the faults: 4 processes at twice the limit, equal demand.
var fleetFaultDemand = []float64{fleetLimit / 2, fleetLimit / 2, fleetLimit / 2, fleetLimit / 2}

const fleetFaultFor = 3 * time.Second

// TestLeasedFleetFaults runs the fleet of TestLeasedFleet through faults:
// one process SIGKILLed (its unspent slices are stranded until their
// leases end: the use of its window measures them), one SIGSTOPped past
// its leases' ends and resumed, Redis SIGSTOPped for 300ms (instances
// spend what they hold, then the failure policy answers), Redis SIGKILLed
// and restarted empty, a Reset and a rule reload while leases are held;
// and on the 3-master cluster, a process SIGKILLed, one SIGSTOPped, the
// master of the fleet's key SIGSTOPped for 300ms, a Reset and a rule
// reload. In every window the admissions stay within the limit.
func TestLeasedFleetFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process runs of a few seconds")
	}
	const dur = fleetFaultFor
	demand := fleetFaultDemand
	t.Run("an instance SIGKILLed", func(t *testing.T) { instanceKilled(t, "") })
	t.Run("an instance SIGSTOPped for 1.2s", func(t *testing.T) { instanceStopped(t, "") })
	t.Run("Redis SIGSTOPped for 300ms", func(t *testing.T) {
		concurrentUnderRace(t)
		srv := startServer(t)
		procs := runFleet(t, fleetRun{alg: "fixed-window", demand: demand, dur: dur, addr: srv.addr, midway: func([]*fleetProc) {
			// At a window's start, when every instance's leases have
			// just ended and its demand needs new slices: late in a
			// window the limit is spent and instances deny locally,
			// asking Redis nothing.
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond)))
			srv.signal(syscall.SIGSTOP)
			time.Sleep(300 * time.Millisecond)
			srv.signal(syscall.SIGCONT)
		}})
		perWindow := windows(t, procs)
		errs := 0
		for _, p := range procs {
			errs += p.errs
		}
		t.Logf("%d errors (answered by the failure policy); admissions per window %v", errs, perWindow)
		if errs == 0 {
			t.Errorf("no errors while Redis was stopped for 300ms: the instances admitted beyond what they held")
		}
	})
	t.Run("Redis SIGKILLed and restarted empty", func(t *testing.T) {
		concurrentUnderRace(t)
		// At a window's start Redis is killed and, 300ms later, started
		// again with no data (no persistence): the instances spend what
		// they hold, the failure policy answers the rest, and after the
		// restart they reserve again (the script reloaded). The restart
		// forgets what the window had charged, so that window may admit
		// that much again: at most twice the limit, as without leases.
		// Every other window holds the limit, and the fleet uses the
		// windows after the restart in full.
		srv := startServer(t)
		var killedAt int64
		// 6s: a whole window follows the one of the restart.
		procs := runFleet(t, fleetRun{alg: "fixed-window", demand: demand, dur: 6 * time.Second, addr: srv.addr, midway: func([]*fleetProc) {
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond)))
			killedAt = time.Now().UnixMicro()
			srv.kill()
			time.Sleep(300 * time.Millisecond)
			srv.start()
		}})
		perWindow := admittedPerWindow(procs)
		kw := killedAt / 1e6
		t.Logf("Redis killed in window %d; admissions per window %v", kw, perWindow)
		last := boundAcrossALoss(t, procs, perWindow, kw)
		if kw+1 >= last {
			t.Fatal("no whole window after the restart: the test measured nothing")
		}
		if after := perWindow[kw+1]; after < fleetLimit*95/100 && !raceBuild {
			t.Errorf("the window after the restart admitted %d, want at least 95%% of %d", after, fleetLimit)
		}
	})
	t.Run("a Reset from another process while leases are held", func(t *testing.T) { resetWhileHeld(t, "") })
	t.Run("a rule reload while leases are held", func(t *testing.T) { reloadWhileHeld(t, "") })
	t.Run("the 3-master cluster", func(t *testing.T) {
		cluster := env(t, "TOLLGATE_REDIS_CLUSTER_ADDRS")
		t.Run("an instance SIGKILLed", func(t *testing.T) { instanceKilled(t, cluster) })
		t.Run("an instance SIGSTOPped for 1.2s", func(t *testing.T) { instanceStopped(t, cluster) })
		t.Run("a Reset from another process while leases are held", func(t *testing.T) { resetWhileHeld(t, cluster) })
		t.Run("a rule reload while leases are held", func(t *testing.T) { reloadWhileHeld(t, cluster) })
		t.Run("the key's master SIGSTOPped for 300ms", func(t *testing.T) {
			// Not beside the other fleets under the race detector: they
			// use the same masters.
			prefix := testPrefix()
			rs, err := New(newClusterClient(t), WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			key := rs.stateKey("fleet", "hot") // the Limiter's name is its scope
			master := clusterMaster(t, key)
			procs := runFleet(t, fleetRun{alg: "fixed-window", demand: demand, dur: dur, cluster: cluster, prefix: prefix, midway: func([]*fleetProc) {
				// The key exists by now: on that master, or the test
				// would stop the wrong one.
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if n, err := master.client.Exists(ctx, key).Result(); err != nil || n != 1 {
					t.Errorf("the fleet's key %q is not on %s, its master by the cluster's slots (EXISTS: %d, %v)", key, master.addr, n, err)
				}
				// At a window's start, as for the single server.
				time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond)))
				resume := pause(t, master.proc)
				time.Sleep(300 * time.Millisecond)
				resume()
			}})
			perWindow := windows(t, procs)
			errs := 0
			for _, p := range procs {
				errs += p.errs
			}
			t.Logf("master %s stopped; %d errors (answered by the failure policy); admissions per window %v", master.addr, errs, perWindow)
			if errs == 0 {
				t.Errorf("no errors while the key's master was stopped for 300ms: the instances admitted beyond what they held")
			}
		})
		t.Run("the key's master SIGKILLed, its replica promoted", func(t *testing.T) {
			// A cluster of its own (3 masters, a replica each): the
			// master of the fleet's key is killed at a window's start,
			// and the cluster promotes its replica about a second later
			// (cluster-node-timeout). Meanwhile the instances spend what
			// they hold, then the failure policy answers. Replication is
			// asynchronous: the promoted replica may lack the last
			// reservations, so the window of the kill may admit them
			// twice, at most twice the limit, as without leases. Every
			// other window holds the limit, and the fleet decides again
			// after the promotion.
			concurrentUnderRace(t)
			tc := startCluster(t, 3)
			prefix := testPrefix()
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: tc.addrs(), ContextTimeoutEnabled: true})
			defer c.Close()
			rs, err := New(c, WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			key := rs.stateKey("fleet", "hot")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			m, err := c.MasterForKey(ctx, key)
			cancel()
			if err != nil {
				t.Fatalf("the master of %q: %v", key, err)
			}
			victim := tc.server(m.Options().Addr)
			var killedAt int64
			// 10s, aligned: the kill comes 5–6s in, and whole windows
			// follow the promotion.
			procs := runFleet(t, fleetRun{alg: "fixed-window", demand: demand, dur: 10 * time.Second, aligned: true, cluster: strings.Join(tc.addrs(), ","), prefix: prefix, midway: func([]*fleetProc) {
				time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond)))
				killedAt = time.Now().UnixMicro()
				victim.kill()
			}})
			perWindow := admittedPerWindow(procs)
			kw := killedAt / 1e6
			t.Logf("master %s killed in window %d; admissions per window %v", victim.addr, kw, perWindow)
			last := boundAcrossALoss(t, procs, perWindow, kw)
			// Once the replica is promoted and the clients have found it
			// (a second or two), a whole window is used again.
			best := 0
			for w := kw + 1; w < last; w++ {
				best = max(best, perWindow[w])
			}
			if want := map[bool]int{false: fleetLimit * 95 / 100, true: 1}[raceBuild]; best < want {
				t.Errorf("at most %d admissions in a whole window after the kill's, want at least %d: the fleet did not decide again after the promotion", best, want)
			}
		})
	})
}

// instanceKilled runs the faults' fleet on the single server, or on
// cluster, and SIGKILLs one process midway: its unspent slices are
// stranded until their leases end (the use of its window measures them),
// and the survivors use the next window in full.
func instanceKilled(t *testing.T, cluster string) {
	concurrentUnderRace(t)
	var killedAt int64
	// Aligned, for 3.25s: the kill comes 375ms into a window, while the
	// processes hold slices of it, and the next window is whole in the
	// run (at a random phase it was cut short one run in five or so).
	procs := runFleet(t, fleetRun{alg: "fixed-window", demand: fleetFaultDemand, dur: 3250 * time.Millisecond, aligned: true, cluster: cluster, midway: func(procs []*fleetProc) {
		procs[0].killed = true
		killedAt = time.Now().UnixMicro()
		procs[0].cmd.Process.Signal(syscall.SIGKILL)
	}})
	perWindow := windows(t, procs)
	w := killedAt / 1e6
	t.Logf("window of the kill: %d of %d admitted (%d stranded at most); next window: %d", perWindow[w], fleetLimit, fleetLimit-perWindow[w], perWindow[w+1])
	if perWindow[w+1] < fleetLimit*95/100 && !raceBuild {
		t.Errorf("the window after the kill admitted %d, want at least 95%% of %d: the survivors should use it", perWindow[w+1], fleetLimit)
	}
}

// instanceStopped runs the faults' fleet on the single server, or on
// cluster, and SIGSTOPs one process for 1.2s midway: its slices' leases end
// while it is stopped, and resumed, it must not spend them in the windows
// that followed.
func instanceStopped(t *testing.T, cluster string) {
	concurrentUnderRace(t)
	// 50ms into a window, when every instance has just reserved its
	// slices, so that the stopped one holds some; 5s, aligned, so that
	// the run goes on for half a second after it resumes.
	var resumed int64
	procs := runFleet(t, fleetRun{alg: "fixed-window", demand: fleetFaultDemand, dur: 5 * time.Second, aligned: true, cluster: cluster, midway: func(procs []*fleetProc) {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
		procs[1].cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(1200 * time.Millisecond)
		procs[1].cmd.Process.Signal(syscall.SIGCONT)
		resumed = time.Now().UnixMicro()
	}})
	perWindow := windows(t, procs)
	after := 0
	for _, a := range procs[1].admitted {
		if a[0] > resumed {
			after++
		}
	}
	t.Logf("the stopped process admitted %d after it resumed; admissions per window %v", after, perWindow)
	if after == 0 {
		t.Errorf("the stopped process admitted nothing after it resumed: it should reserve again")
	}
}

// resetWhileHeld runs the fleet on the redis-server, or on the cluster,
// and resets its key from another process early in a window.
func resetWhileHeld(t *testing.T, cluster string) {
	concurrentUnderRace(t)
	// The test process resets the fleet's key through a store
	// without leases, early in a window. The Reset replenishes the
	// shared state; the instances do not see it until their slices'
	// leases end, and may spend what they hold, which was charged
	// before it. So the window of the Reset admits at most what was
	// charged before the Reset (its quota, spent before or after it)
	// and a fresh quota after it: twice its quota, as it would
	// without leases had every slice been spent before the Reset.
	// Every other window admits at most its quota.
	prefix := testPrefix()
	var c Client
	if cluster != "" {
		c = newClusterClient(t)
	} else {
		c = newClient(t)
	}
	rs, err := New(c, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	plain, err := core.New(rs, fleetLimitOf("fixed-window"), core.WithName("fleet"))
	if err != nil {
		t.Fatal(err)
	}
	var resetAt int64
	procs := runFleet(t, fleetRun{alg: "fixed-window", demand: fleetFaultDemand, dur: fleetFaultFor, prefix: prefix, cluster: cluster, midway: func([]*fleetProc) {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 200*time.Millisecond)))
		resetAt = time.Now().UnixMicro()
		if _, err := plain.Reset(context.Background(), "hot"); err != nil {
			t.Error(err)
		}
	}})
	perWindow := admittedPerWindow(procs)
	rw := resetAt / 1e6
	t.Logf("Reset in window %d; admissions per window %v", rw, perWindow)
	for w, n := range perWindow {
		switch {
		case w == rw && n > 2*fleetLimit:
			t.Errorf("window %d, of the Reset: %d admissions, more than the quota charged before the Reset and a fresh one after it (%d)", w, n, 2*fleetLimit)
		case w != rw && n > fleetLimit:
			t.Errorf("window %d: %d admissions, limit %d", w, n, fleetLimit)
		}
	}
	if _, n := used(perWindow); n == 0 {
		t.Error("no whole window inside the run: the test measured nothing")
	}
}

// reloadWhileHeld runs the fleet on the redis-server, or on the cluster,
// and has every process reload its rules to half the limit early in a
// window.
func reloadWhileHeld(t *testing.T, cluster string) {
	concurrentUnderRace(t)
	// Early in a window every process reloads its rules, halving the
	// limit, and flushes its leases. Every admission was checked
	// against the limit of the rules it ran under, on one shared
	// count: the window of the reload admits at most the old limit,
	// every later one at most the new. 7s: the reload comes up to
	// 1.2s after the run's middle, and a whole window must follow.
	var reloadAt int64
	procs := runFleet(t, fleetRun{alg: "fixed-window", demand: fleetFaultDemand, dur: 7 * time.Second, reload: true, cluster: cluster, midway: func(procs []*fleetProc) {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 200*time.Millisecond)))
		reloadAt = time.Now().UnixMicro()
		for _, p := range procs {
			p.cmd.Process.Signal(syscall.SIGUSR1)
		}
	}})
	perWindow := admittedPerWindow(procs)
	rw := reloadAt / 1e6
	t.Logf("reload in window %d; admissions per window %v", rw, perWindow)
	after, n := 0, 0
	last := int64(0)
	for w := range perWindow {
		last = max(last, w)
	}
	for w, c := range perWindow {
		switch {
		case w <= rw && c > fleetLimit:
			t.Errorf("window %d: %d admissions, limit %d", w, c, fleetLimit)
		case w > rw && c > fleetLimit/2:
			t.Errorf("window %d, after the reload: %d admissions, new limit %d", w, c, fleetLimit/2)
		case w > rw && w < last:
			after += c
			n++
		}
	}
	if n == 0 {
		t.Fatal("no whole window after the reload: the test measured nothing")
	}
	if float64(after) < 0.95*float64(n*fleetLimit/2) && !raceBuild {
		t.Errorf("%d admissions in %d whole windows after the reload: want at least 95%% of %d each", after, n, fleetLimit/2)
	}
}

// boundAcrossALoss checks a fleet through which Redis lost the key's
// state in window kw (a server killed and restarted empty, a master killed
// and replaced by a replica that lacked its last writes): that window may
// admit what it had charged again, at most twice the limit, as without
// leases; every other window at most the limit; and while Redis was gone
// the instances answered errors once they had spent what they held. It
// returns the run's last window.
func boundAcrossALoss(t *testing.T, procs []*fleetProc, perWindow map[int64]int, kw int64) (last int64) {
	t.Helper()
	errs := 0
	for _, p := range procs {
		errs += p.errs
	}
	t.Logf("%d errors answered by the failure policy", errs)
	for w, n := range perWindow {
		last = max(last, w)
		switch {
		case w == kw && n > 2*fleetLimit:
			t.Errorf("window %d, of the loss: %d admissions, more than twice the limit", w, n)
		case w != kw && n > fleetLimit:
			t.Errorf("window %d: %d admissions, limit %d", w, n, fleetLimit)
		}
	}
	if errs == 0 {
		t.Errorf("no errors while Redis was gone: the instances admitted beyond what they held")
	}
	return last
}
