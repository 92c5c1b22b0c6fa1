//go:build !unix

package bench

import "time"

// processCPUTime is not available here: it returns false.
func processCPUTime() (time.Duration, bool) { return 0, false }
