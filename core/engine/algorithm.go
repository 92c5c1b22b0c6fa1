package engine

import "strconv"

// Algorithm selects how a limit counts; the values are core.Algorithm's,
// whose constants document each one's math.
type Algorithm uint8

// The algorithms, in core.Algorithm's order.
const (
	SlidingWindow Algorithm = iota
	FixedWindow
	SlidingLog
	BucketedWindow
	TokenBucket
	GCRA
	LeakyBucket
	Concurrency

	numAlgorithms
)

var algorithmNames = [numAlgorithms]string{
	SlidingWindow:  "sliding-window",
	FixedWindow:    "fixed-window",
	SlidingLog:     "sliding-log",
	BucketedWindow: "bucketed-window",
	TokenBucket:    "token-bucket",
	GCRA:           "gcra",
	LeakyBucket:    "leaky-bucket",
	Concurrency:    "concurrency",
}

// String returns the algorithm's name, e.g. "sliding-window".
func (a Algorithm) String() string {
	if a < numAlgorithms {
		return algorithmNames[a]
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

// Valid reports whether a is a known algorithm.
func (a Algorithm) Valid() bool { return a < numAlgorithms }

// Logs reports whether limits of a keep a log of marks (State.Log):
// SlidingLog, BucketedWindow and Concurrency.
func (a Algorithm) Logs() bool { return a == SlidingLog || a == BucketedWindow || a == Concurrency }

// rated reports whether the algorithm refills continuously at Q per P
// (TokenBucket, GCRA, LeakyBucket): those use Burst and a time tick.
func (a Algorithm) rated() bool { return a == TokenBucket || a == GCRA || a == LeakyBucket }
