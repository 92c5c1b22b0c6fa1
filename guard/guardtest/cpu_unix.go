//go:build unix

package guardtest

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time, user and system, that the process has used
// so far: its goroutines and the runtime's (the garbage collector
// included). It returns 0 where that is not known (outside Unix).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
