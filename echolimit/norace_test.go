//go:build !race

package echolimit_test

// raceEnabled reports a build with the race detector, which makes every
// sync.Pool drop a quarter of the objects put back, at random.
const raceEnabled = false
