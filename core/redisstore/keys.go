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
	if !strings.ContainsAny(k, `{}\`) {
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

// stateKey returns prefix{tag} for user key k in scope.
func (s *Store) stateKey(scope, k string) string {
	t := tag(k, s.maxKeyLen)
	var sc string
	if scope != "" {
		sc = escape(scope) + `\:`
	}
	var b strings.Builder // one allocation: the key's bytes become the string
	b.Grow(len(s.prefix) + len(sc) + len(t) + 2)
	b.WriteString(s.prefix)
	b.WriteByte('{')
	b.WriteString(sc)
	b.WriteString(t)
	b.WriteByte('}')
	return b.String()
}

// logKey returns the key of the log of the k-th limit of layout ident.
func logKey(state string, ident uint64, k int) string {
	return state + ":" + strconv.FormatUint(ident, 36) + ":" + strconv.Itoa(k)
}
