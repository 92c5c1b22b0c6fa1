package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Key layout. Every key of one decision starts with prefix{tag}, where tag
// is the user key made free of braces (so that Redis Cluster hashes every
// key of the decision on the same tag, whatever bytes the user key holds):
//
//	prefix{tag}                the states of the key's limits, one record per layout
//	prefix{tag}:<ident>:<k>    the log of the k-th SlidingLog or BucketedWindow
//	                           limit of layout ident (base 36) in an operation
//	prefix{tag}:op:<id>        the reply of operation id, kept briefly (retries)
//
// tag is the user key with '\' written "\\", '{' written "\(" and '}'
// written "\)", so that it never holds a brace and distinct keys give
// distinct tags; a user key longer than the maximum length is replaced by
// "\#" followed by the hex SHA-256 of the key, which no escaped key can be.
// A non-empty scope (engine.Plan.Scope) comes first, escaped the same way and
// followed by "\:", which no escaped string holds either.

// tag returns the hash tag of user key k.
func tag(k string, maxLen int) string {
	if len(k) > maxLen {
		sum := sha256.Sum256([]byte(k))
		return `\#` + hex.EncodeToString(sum[:])
	}
	return escape(k)
}

// escape returns k with '\', '{' and '}' escaped.
func escape(k string) string {
	if !needsEscape(k) {
		return k
	}
	var b strings.Builder
	b.Grow(len(k) + 8)
	for i := 0; i < len(k); i++ {
		switch c := k[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '{':
			b.WriteString(`\(`)
		case '}':
			b.WriteString(`\)`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// needsEscape reports whether k holds a byte escape changes. (A loop
// over the bytes: strings.ContainsAny builds its set of bytes on every call,
// which cost more than the rest of a state key's making.)
func needsEscape(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c == '\\' || c == '{' || c == '}' {
			return true
		}
	}
	return false
}

// stateKey returns prefix{tag} for user key k in scope.
func (s *Store) stateKey(scope, k string) string {
	return s.keyHead(scope) + tag(k, s.maxKeyLen) + "}"
}

// keyHead returns what every state key in scope starts with: the prefix,
// the brace that opens the hash tag, and the escaped scope with its "\:"
// when there is one. A plan keeps its own (prepared.head), so that making
// an operation's key is one concatenation and one allocation.
func (s *Store) keyHead(scope string) string {
	if scope == "" {
		return s.prefix + "{"
	}
	return s.prefix + "{" + escape(scope) + `\:`
}

// logKey returns the key of the log of the k-th limit of layout ident.
func logKey(state string, ident uint64, k int) string {
	return state + ":" + strconv.FormatUint(ident, 36) + ":" + strconv.Itoa(k)
}
