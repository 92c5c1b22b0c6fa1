package redisstore

import (
	"os/exec"
	"syscall"
)

// dieWithTest has the kernel kill cmd's process when the test process
// that started it dies, killed or crashed before its cleanups ran: a
// private redis-server then never outlives its test. (Pdeathsig is sent
// when the starting thread ends; Go ends none of the threads that run
// these tests' goroutines while the process lives.)
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
