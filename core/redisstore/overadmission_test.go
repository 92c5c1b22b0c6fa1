package redisstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// The child processes of TestNoOverAdmissionAcrossProcesses run
// TestOverAdmissionChild with these variables set.
const (
	childKeyEnv    = "TOLLGATE_TEST_CHILD_KEY"
	childPrefixEnv = "TOLLGATE_TEST_CHILD_PREFIX"
	childBatchEnv  = "TOLLGATE_TEST_CHILD_BATCH"
)

// overLimits are the limits the processes share: a GCRA and a fixed window
// whose period (400 days) makes the exact admitted total known: the GCRA
// refills one unit every 400d/1000 ≈ 9.6 hours and the window does not end
// during the test. Both must admit, so the total is min(1000, 1500).
var overLimits = []core.Limit{
	core.Per(1000, core.MaxPeriod).WithAlgorithm(core.GCRA),
	core.Per(1500, core.MaxPeriod).WithAlgorithm(core.FixedWindow),
}

const overAdmitted = 1000

// TestNoOverAdmissionAcrossProcesses starts 4 processes (this test binary
// again) of 32 goroutines each, all taking from one key of the shared
// Redis under Redis TIME: together they are admitted exactly 1000.
func TestNoOverAdmissionAcrossProcesses(t *testing.T) {
	addr := env(t, "TOLLGATE_REDIS_ADDR")
	prefix, key := testPrefix(), "shared"
	const procs = 4
	total := int64(0)
	for i, n := range children(t, procs, "TestOverAdmissionChild", "admitted", func(i int) []string {
		return []string{"TOLLGATE_REDIS_ADDR=" + addr, childKeyEnv + "=" + key, childPrefixEnv + "=" + prefix,
			childBatchEnv + "=" + strconv.FormatBool(i%2 == 1)} // half the processes batch
	}) {
		t.Logf("process %d admitted %d", i, n)
		total += n
	}
	if total != overAdmitted {
		t.Errorf("%d processes × 32 goroutines admitted %d in total, want exactly %d", procs, total, overAdmitted)
	}
}

// TestOverAdmissionChild is one process of the test above; it does nothing
// unless started by it.
func TestOverAdmissionChild(t *testing.T) {
	key := os.Getenv(childKeyEnv)
	if key == "" {
		t.Skip("run by TestNoOverAdmissionAcrossProcesses")
	}
	opts := []Option{WithPrefix(os.Getenv(childPrefixEnv))}
	if os.Getenv(childBatchEnv) == "true" {
		opts = append(opts, WithBatching(32, 2))
	} else {
		opts = append(opts, WithBatching(0, 0))
	}
	s, err := New(newClient(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 16 { // 4 × 32 × 16 = 2048 attempts for 1000 units
				d, err := s.Apply(ctx, engine.Op{Plan: planOf("", overLimits...), Key: key, Cost: 1})
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("admitted=%d\n", admitted.Load())
}

// children runs n processes of this test binary, each running only the
// test named test with the variables env returns for it, and returns the
// number each printed on a line "name=N". A process that fails fails t.
func children(t *testing.T, n int, test, name string, env func(i int) []string) []int64 {
	t.Helper()
	outs := make([]strings.Builder, n)
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), env(i)...)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	counts := make([]int64, n)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
		}
		for _, line := range strings.Split(outs[i].String(), "\n") {
			if _, err := fmt.Sscanf(strings.TrimSpace(line), name+"=%d", &counts[i]); err == nil {
				break
			}
		}
	}
	return counts
}
