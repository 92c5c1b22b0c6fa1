// Package storeflags marks what a store of this repository promises core
// beyond the core.Store interface, where an exported method would let any
// store promise it, and core would trust stores it has never seen.
package storeflags

// OnceApplier is a store that applies each op once, before Apply (or
// Take) returns, and keeps nothing of its Result: core may then hand it
// the memory of each limit's part of the Result (engine.Op.Parts), which
// core reuses once the call returns. A wrapper that applies an op twice,
// or keeps a Result, must not be one. A store becomes one by embedding
// Once.
type OnceApplier interface{ appliesOnce() }

// Once, embedded in a store, makes it an OnceApplier.
type Once struct{}

func (Once) appliesOnce() {}
