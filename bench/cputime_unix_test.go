//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPUTime returns the CPU time (user and system) used so far by the
// whole process, and true; on error, false.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
