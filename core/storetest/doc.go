// Package storetest is the conformance suite of core.Store: every store of
// Tollgate runs it, and third-party stores can too.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) core.Store { return mystore.New(...) })
//	}
//
// The suite drives the store through engine.Op values with Now set (a fake
// clock), on plans made by Plan, and holds every Result to the one
// engine.Step computes on the same operations: every algorithm, every kind of operation, weighted and huge
// costs, several limits per key, many keys, randomized traces. It checks
// that invalid input is an error that changes nothing, that keys of any
// bytes are distinct and safe, and that concurrent callers hammering one key
// are admitted exactly what the algorithm allows, never more.
//
// A store that keeps state in real time (the Redis store's TTLs) must keep a
// key at least until its state is fully replenished plus a margin of a
// second or more, since traces move the fake clock faster than real time.
package storetest
