package redisstore

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
)

// The child processes of the tests below run TestConcurrencyChild with
// these variables set.
const (
	concModeEnv   = "TOLLGATE_TEST_CONC_MODE" // "hold" or "kill"
	concKeyEnv    = "TOLLGATE_TEST_CONC_KEY"
	concPrefixEnv = "TOLLGATE_TEST_CONC_PREFIX"
)

const concSlots = 5

// concLimits are the limits of TestConcurrencyAcrossProcesses: 5 in flight,
// and a rate that never binds, in one decision.
var concLimits = []core.Limit{core.InFlight(concSlots, 10*time.Second), core.PerSecond(1_000_000)}

// inFlightScript counts an acquisition observed inside the "handler": the
// holders in flight, whose peak it keeps; it returns the new count.
var inFlightScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end
return n`)

// Processes (this test binary again, 3 of them, 16 goroutines each)
// acquire one unit of a key limited to 5 in flight, count themselves in
// flight in Redis while they hold it, and release it: the count never
// passes 5, and reaches it.
func TestConcurrencyAcrossProcesses(t *testing.T) {
	addr := env(t, "TOLLGATE_REDIS_ADDR")
	prefix, key := testPrefix(), "conc"
	c := newClient(t)
	t.Cleanup(func() { deleteKeys(c, prefix) })
	const procs = 3
	acquired := int64(0)
	for _, n := range children(t, procs, "TestConcurrencyChild", "acquired", func(int) []string {
		return []string{"TOLLGATE_REDIS_ADDR=" + addr, concModeEnv + "=hold", concKeyEnv + "=" + key, concPrefixEnv + "=" + prefix}
	}) {
		acquired += n
	}
	ctx := context.Background()
	peak, err := c.Get(ctx, prefix+"peak").Int()
	if err != nil {
		t.Fatal(err)
	}
	now, err := c.Get(ctx, prefix+"inflight").Int()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d processes × 16 goroutines acquired %d times; at most %d in flight at once", procs, acquired, peak)
	if peak > concSlots || now != 0 {
		t.Fatalf("%d held at once (want at most %d), %d still counted at the end", peak, concSlots, now)
	}
	if peak < concSlots || acquired < 100 {
		t.Fatalf("peak %d, %d acquisitions: the load never filled the limit, so tested nothing", peak, acquired)
	}
	// Every unit was released: the whole limit is free.
	s := newStore(t, c, WithPrefix(prefix))
	lim, err := core.New(s, append(limitOptions(concLimits), core.WithName("conc"), core.WithTimeout(10*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Peek(ctx, key); err != nil || d.States[0].Remaining != concSlots {
		t.Fatalf("after every holder released: %+v, %v; want %d free", d, err, concSlots)
	}
}

// limitOptions returns limits as Options.
func limitOptions(limits []core.Limit) []core.Option {
	opts := make([]core.Option, len(limits))
	for i, l := range limits {
		opts[i] = l
	}
	return opts
}

// A holder that dies (SIGKILL) without releasing holds its units until
// its lease runs out, and not longer: the denial's RetryAfter says when.
func TestKilledHolderFreesItsUnitsAfterTheLease(t *testing.T) {
	addr := env(t, "TOLLGATE_REDIS_ADDR")
	prefix, key := testPrefix(), "killed"
	c := newClient(t)
	t.Cleanup(func() { deleteKeys(c, prefix) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrencyChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TOLLGATE_REDIS_ADDR="+addr, concModeEnv+"=kill", concKeyEnv+"="+key, concPrefixEnv+"="+prefix)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	held := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "held" {
			held = true
			break
		}
	}
	if !held {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the holder never said it held its units")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	s := newStore(t, c, WithPrefix(prefix))
	lim, err := core.New(s, core.InFlight(2, killLease), core.WithName("killed"), core.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := lim.Allow(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > killLease {
		t.Fatalf("right after the holder died: %+v; want denied until its lease runs out, within %v", d, killLease)
	}
	time.Sleep(d.RetryAfter + 20*time.Millisecond)
	if d, err := lim.AllowN(ctx, key, 2); err != nil || !d.Allowed {
		t.Fatalf("after the lease: %+v, %v; want both units free", d, err)
	}
}

const killLease = 700 * time.Millisecond

// TestConcurrencyChild is one process of the tests above; it does nothing
// unless started by one.
func TestConcurrencyChild(t *testing.T) {
	mode, key := os.Getenv(concModeEnv), os.Getenv(concKeyEnv)
	if mode == "" {
		t.Skip("run by TestConcurrencyAcrossProcesses and TestKilledHolderFreesItsUnitsAfterTheLease")
	}
	prefix := os.Getenv(concPrefixEnv)
	c := newClient(t)
	s, err := New(c, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if mode == "kill" {
		lim, err := core.New(s, core.InFlight(2, killLease), core.WithName("killed"), core.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := lim.AllowN(ctx, key, 2); err != nil || !d.Allowed {
			t.Fatalf("AllowN(2): %+v, %v", d, err)
		}
		fmt.Println("held")
		time.Sleep(time.Minute) // until killed
		return
	}
	// A long timeout: this test is about the bound, not latency, and runs
	// beside other test binaries on a loaded machine.
	lim, err := core.New(s, append(limitOptions(concLimits), core.WithName("conc"), core.WithTimeout(10*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	var acquired atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				d, err := lim.Allow(ctx, key)
				if err != nil {
					t.Errorf("Allow: %v", err)
					return
				}
				if !d.Allowed {
					time.Sleep(time.Millisecond)
					continue
				}
				acquired.Add(1)
				if err := inFlightScript.Run(ctx, c, []string{prefix + "inflight", prefix + "peak"}).Err(); err != nil {
					t.Errorf("counting in: %v", err)
				}
				time.Sleep(2 * time.Millisecond) // the handler's work
				if err := c.Decr(ctx, prefix+"inflight").Err(); err != nil {
					t.Errorf("counting out: %v", err)
				}
				if _, err := lim.Release(ctx, key, d.Lease); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("acquired=%s\n", strconv.FormatInt(acquired.Load(), 10))
}

// A release finds its lease's mark by a binary search of the log: it reads
// the log's head and its newest mark, as every operation on it does (a
// chunk each, LRANGE), and then at most ⌈log2 2000⌉ + 1 marks alone
// (LINDEX), with 2,000 units in flight, whether its lease is the newest, in
// the middle, the oldest, or not in the log at all; and it frees exactly
// its units, once. A scan read every mark older than the lease, in chunks
// of 64 (more than 30 LRANGEs for the newest here), and took the server
// 4 to 8 ms in a log of 10,000.
func TestAReleaseReadsAFewMarksOfALongLog(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	const n, quota = 2000, 2100
	lim, err := core.New(s, core.InFlight(quota, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	leases := make([]int64, 0, n)
	for range n {
		d, err := lim.Allow(ctx, "k")
		if err != nil || !d.Allowed {
			t.Fatalf("acquire %d: %v, allowed %v", len(leases), err, d.Allowed)
		}
		leases = append(leases, d.Lease)
	}
	mon := newMonitor(t, c.Options().Addr)
	held := int64(n)
	for _, probe := range []struct {
		name  string
		lease int64
		frees bool
	}{
		{"newest", leases[n-1], true},
		{"third newest", leases[n-3], true},
		{"middle", leases[n/2], true},
		{"oldest", leases[0], true},
		{"the middle again", leases[n/2], false},
		{"before the oldest", leases[0] - 1, false},
		{"after the newest", leases[n-1] + 1, false},
		{"between two", leases[n/3] + 1, leases[n/3]+1 == leases[n/3+1]},
	} {
		d, err := lim.Release(ctx, "k", probe.lease)
		if err != nil {
			t.Fatalf("release of %s: %v", probe.name, err)
		}
		if probe.frees {
			held--
		}
		if d.Remaining != quota-held {
			t.Errorf("release of %s: Remaining %d, want %d", probe.name, d.Remaining, quota-held)
		}
		if scans, reads := mon.logReads(t, c, s.prefix, probe.name); scans > 2 || reads > 12 {
			t.Errorf("release of %s: %d LRANGE and %d LINDEX on the log, want at most 2 and 12", probe.name, scans, reads)
		}
	}
}

// A refund with a receipt on a SlidingLog finds the charge's mark as a
// release finds its lease's (see above): with 2,000 marks, at most 2
// chunks and 12 marks read, whichever charge it refunds, and exactly the
// units that mark still holds given back, a part of them or all (which
// removes the mark).
func TestARefundReadsAFewMarksOfALongLog(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	const n, quota = 2000, 4100
	lim, err := core.New(s, core.Per(quota, time.Hour).WithAlgorithm(core.SlidingLog))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	receipts := make([]core.Receipt, 0, n)
	for range n {
		d, err := lim.AllowN(ctx, "k", 2)
		if err != nil || !d.Allowed {
			t.Fatalf("take %d: %v, allowed %v", len(receipts), err, d.Allowed)
		}
		receipts = append(receipts, d.Receipt())
	}
	mon := newMonitor(t, c.Options().Addr)
	used := int64(2 * n)
	for _, probe := range []struct {
		name        string
		rc          core.Receipt
		cost, gives int64
	}{
		{"a part of the newest", receipts[n-1], 1, 1},
		{"the rest of the newest", receipts[n-1], 2, 1},
		{"the third newest", receipts[n-3], 2, 2},
		{"the middle", receipts[n/2], 2, 2},
		{"the oldest", receipts[0], 5, 2},
		{"the middle again", receipts[n/2], 2, 0},
	} {
		d, err := lim.RefundTo(ctx, "k", probe.rc, probe.cost)
		if err != nil {
			t.Fatalf("refund of %s: %v", probe.name, err)
		}
		used -= probe.gives
		if d.Remaining != quota-used {
			t.Errorf("refund of %s: Remaining %d, want %d", probe.name, d.Remaining, quota-used)
		}
		if scans, reads := mon.logReads(t, c, s.prefix, probe.name); scans > 2 || reads > 12 {
			t.Errorf("refund of %s: %d LRANGE and %d LINDEX on the log, want at most 2 and 12", probe.name, scans, reads)
		}
	}
}

// logReads returns how many chunks (LRANGE) and single marks (LINDEX) of
// the logs of keys of prefix the server read since the last call, up to an
// ECHO of marker.
func (m *monitor) logReads(t *testing.T, c *redis.Client, prefix, marker string) (scans, reads int) {
	t.Helper()
	for _, cmd := range m.until(t, c, prefix+marker) { // the prefix: another run's markers are not ours
		switch {
		case strings.Contains(cmd, `"LRANGE" "`+prefix):
			scans++
		case strings.Contains(cmd, `"LINDEX" "`+prefix):
			reads++
		}
	}
	return scans, reads
}

// A monitor reads what the server runs (MONITOR), the commands of scripts
// included, on a connection of its own.
type monitor struct {
	conn net.Conn
	rd   *bufio.Reader
}

func newMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	m := &monitor{conn: conn, rd: bufio.NewReader(conn)}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatalf("MONITOR: %v", err)
	}
	if l := m.line(t); l != "+OK" {
		t.Fatalf("MONITOR: %q", l)
	}
	return m
}

// line returns the next line the server sent.
func (m *monitor) line(t *testing.T) string {
	t.Helper()
	_ = m.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	l, err := m.rd.ReadString('\n')
	if err != nil {
		t.Fatalf("MONITOR: %v", err)
	}
	return strings.TrimRight(l, "\r\n")
}

// until returns the commands the server ran since the last call, up to an
// ECHO of marker, which it sends with c.
func (m *monitor) until(t *testing.T, c *redis.Client, marker string) []string {
	t.Helper()
	marker = "monitor:" + marker
	if err := c.Echo(context.Background(), marker).Err(); err != nil {
		t.Fatalf("ECHO: %v", err)
	}
	var cmds []string
	for {
		l := m.line(t)
		if strings.HasSuffix(l, ` "`+marker+`"`) { // "echo", as go-redis sends it
			return cmds
		}
		cmds = append(cmds, l)
	}
}
