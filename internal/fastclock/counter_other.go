//go:build !linux || !amd64 || purego

package fastclock

// counter returns nil: no counter is used here, and a Clock reads the
// monotonic clock.
func counter() func() uint64 { return nil }
