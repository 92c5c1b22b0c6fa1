package redisstore

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A server is a redis-server the test started on a free loopback port, so
// that it can stop and restart it without disturbing the shared one.
type server struct {
	t    testing.TB
	addr string
	dir  string
	conf string   // a configuration file to start with, or ""
	args []string // beyond the port, bind address and persistence
	cmd  *exec.Cmd
}

// startServer starts a redis-server on a free port, stopped at the end of
// t. It skips when redis-server is not installed, unless Redis is required.
func startServer(t testing.TB) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("TOLLGATE_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server not found and TOLLGATE_REQUIRE_REDIS=1: %v", err)
		}
		t.Skip("redis-server not installed")
	}
	s := &server{t: t, addr: freeAddr(t), dir: t.TempDir()}
	s.start()
	t.Cleanup(s.kill)
	return s
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func (s *server) start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.addr)
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(append(args, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir), s.args...)
	s.cmd = exec.Command("redis-server", args...)
	dieWithTest(s.cmd)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	for i := 0; ; i++ {
		if c.Ping(context.Background()).Err() == nil {
			return
		}
		if i == 200 {
			s.t.Fatalf("redis-server on %s did not start", s.addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill stops the server at once (SIGKILL), as a crash would.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

func (s *server) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// sharedPID returns the process of the shared redis-server
// (TOLLGATE_REDIS_PID_FILE), for tests that pause it.
func sharedPID(t testing.TB) *os.Process {
	t.Helper()
	b, err := os.ReadFile(env(t, "TOLLGATE_REDIS_PID_FILE"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("TOLLGATE_REDIS_PID_FILE: %v", err)
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pause stops p with SIGSTOP until the returned function resumes it (it is
// also resumed at the end of t, whatever happens).
func pause(t testing.TB, p *os.Process) (resume func()) {
	t.Helper()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", p.Pid, err)
	}
	resume = func() { p.Signal(syscall.SIGCONT) }
	t.Cleanup(resume)
	return resume
}

// A clusterNode is a master of the shared cluster.
type clusterNode struct {
	addr   string
	client *redis.Client // of the node alone (the cluster client's)
	proc   *os.Process
}

// clusterMaster returns the master of the shared cluster that holds key,
// by the cluster's slots, with its process (TOLLGATE_REDIS_CLUSTER_PID_FILES:
// their PID files, in the order of TOLLGATE_REDIS_CLUSTER_ADDRS), for tests
// that pause it.
func clusterMaster(t testing.TB, key string) clusterNode {
	t.Helper()
	addrs := strings.Split(env(t, "TOLLGATE_REDIS_CLUSTER_ADDRS"), ",")
	files := strings.Split(env(t, "TOLLGATE_REDIS_CLUSTER_PID_FILES"), ",")
	if len(files) != len(addrs) {
		t.Fatalf("TOLLGATE_REDIS_CLUSTER_PID_FILES has %d files for the %d masters of TOLLGATE_REDIS_CLUSTER_ADDRS", len(files), len(addrs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := newClusterClient(t).MasterForKey(ctx, key)
	if err != nil {
		t.Fatalf("the master of %q: %v", key, err)
	}
	addr := m.Options().Addr
	_, port, _ := net.SplitHostPort(addr)
	for i, a := range addrs {
		if _, p, _ := net.SplitHostPort(a); p != port {
			continue
		}
		b, err := os.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("TOLLGATE_REDIS_CLUSTER_PID_FILES: %s: %v", files[i], err)
		}
		p, err := os.FindProcess(pid)
		if err != nil {
			t.Fatal(err)
		}
		return clusterNode{addr: addr, client: m, proc: p}
	}
	t.Fatalf("the master of %q, %s, is none of TOLLGATE_REDIS_CLUSTER_ADDRS %v", key, addr, addrs)
	return clusterNode{}
}
