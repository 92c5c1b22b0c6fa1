//go:build race

package examples_test

// raceEnabled reports whether the tests run with the race detector: the
// programs they build are then built alike (buildFlags).
const raceEnabled = true
