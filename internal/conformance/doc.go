// Package conformance holds tests that need dependencies the root module
// must not have: an independent RFC 9651 parser (github.com/dunglas/httpsfv)
// checks every rate-limit header the guard package writes, and chi checks
// that the nethttp middleware works in a chi router. It has no API.
package conformance
