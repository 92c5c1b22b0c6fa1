//go:build race

package redisstore

// raceBuild is true under the race detector, whose builds run several
// times slower: timing-sensitive checks are relaxed under it.
const raceBuild = true
