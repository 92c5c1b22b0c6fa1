package keyfuncs

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
)

// MaxKeyLen is the longest value, in bytes, that Header, Query, Route,
// Method, Path and ContextValue turn into a key. A longer value makes them
// return an error matching ErrKeyTooLong, so that a client cannot make the
// store hold arbitrarily large keys. Join may return up to MaxKeyLen bytes
// per part, plus separators.
const MaxKeyLen = 1024

// Header returns a Func whose key is the first value of the named request
// header, verbatim (case and surrounding text kept). The name is matched
// case-insensitively. A missing or empty header yields an error matching
// ErrNoKey; a value longer than MaxKeyLen one matching ErrKeyTooLong. Both
// are SourceErrors that name the header as given here ("X-API-Key", not
// its canonical form "X-Api-Key"), which a 400 tells the client.
//
// A header is chosen by the client unless a proxy in front of the service
// sets or checks it: key on it only when that is the case, or when the
// value is verified by an earlier middleware (an API key, say).
//
// Header panics if name is empty, a programmer error: no request could
// ever have the key.
func Header(name string) Func {
	if name == "" {
		panic("keyfuncs: Header: empty header name")
	}
	canonical := http.CanonicalHeaderKey(name)
	return valueFunc("header", name, func(r Request) string { return r.Header(canonical) })
}

// Query returns a Func whose key is the first value of the named URL query
// parameter, decoded. A missing or empty parameter yields an error matching
// ErrNoKey; a value longer than MaxKeyLen one matching ErrKeyTooLong.
// Query panics if name is empty, a programmer error.
func Query(name string) Func {
	if name == "" {
		panic("keyfuncs: Query: empty parameter name")
	}
	return valueFunc("query parameter", name, func(r Request) string { return r.Query(name) })
}

// Route returns a Func whose key is the pattern of the matched route, as
// reported by Request.Route, e.g. "/users/:id": one key per route, whatever
// the path parameters. When the router reports no route (Route is "", as
// for a request that matched no route), the Func returns an error matching
// ErrNoKey. It deliberately does not fall back to the path, which the client
// chooses and which has unbounded cardinality; use Path for that.
func Route() Func {
	return valueFunc("route", "", func(r Request) string { return r.Route() })
}

// Method returns a Func whose key is the request method, e.g. "POST".
// Methods are case-sensitive and are not normalised.
func Method() Func {
	return valueFunc("method", "", func(r Request) string { return r.Method() })
}

// Path returns a Func whose key is the URL path, e.g. "/users/42". The
// client chooses the path, so a key on it alone is one bucket per path the
// client cares to invent; combine it with a client key using Join.
func Path() Func {
	return valueFunc("path", "", func(r Request) string { return r.Path() })
}

// Static returns a Func that returns s for every request: one bucket shared
// by all requests, e.g. a global limit. Static panics if s is empty, a
// programmer error: every request would fail for want of a key.
func Static(s string) Func {
	if s == "" {
		panic("keyfuncs: Static: empty key")
	}
	return func(Request) (string, error) { return s, nil }
}

// ContextValue returns a Func whose key is the value stored under key in the
// request context, typically a user or tenant ID set by an authentication
// middleware that runs first. The value must be a string or implement
// fmt.Stringer. A missing value, a nil one, an empty string or a value of
// another type yields an error matching ErrNoKey; a value longer than
// MaxKeyLen one matching ErrKeyTooLong.
func ContextValue(key any) Func {
	return Lookup(fmt.Sprintf("context value %#v", key), func(r Request) (any, error) {
		return r.Context().Value(key), nil
	})
}

// Lookup returns a Func whose key is the value get finds for a request,
// named what in errors: the building block of ContextValue and of the
// adapters' keys from framework-scoped values (gin's and echo's c.Get,
// fiber's c.Locals). The value must be a string or implement fmt.Stringer. A nil
// value (or nil pointer), an empty string or a value of another type
// yields an error matching ErrNoKey; a value longer than MaxKeyLen one
// matching ErrKeyTooLong; an error from get is returned as is.
func Lookup(what string, get func(Request) (any, error)) Func {
	errMissing := fmt.Errorf("%w: %s is missing or empty", ErrNoKey, what)
	errLong := fmt.Errorf("%w: %s is longer than %d bytes", ErrKeyTooLong, what, MaxKeyLen)
	return func(r Request) (string, error) {
		v, err := get(r)
		if err != nil {
			return "", err
		}
		var s string
		switch v := v.(type) {
		case nil:
			return "", errMissing
		case string:
			s = v
		case fmt.Stringer:
			if isNilPointer(v) {
				return "", errMissing
			}
			s = v.String()
		default:
			return "", fmt.Errorf("%w: %s has type %T, want string or fmt.Stringer", ErrNoKey, what, v)
		}
		switch {
		case s == "":
			return "", errMissing
		case len(s) > MaxKeyLen:
			return "", errLong
		}
		return s, nil
	}
}

// isNilPointer reports whether v holds a nil pointer, whose String method
// would likely panic.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Join returns a Func whose key is the keys of fns joined with sep, e.g.
// Join(":", IP(), Route()) for one bucket per client and route. If any of
// fns returns an error, the Func returns that error (wrapped, so errors.Is
// still matches), and an empty key (every part empty) is an error
// matching ErrNoKey. Join panics if fns is empty or one of them is nil,
// programmer errors.
//
// Join does not escape sep inside the parts: choose a separator that the
// parts cannot contain when they are client-chosen (IPv6 keys contain ':'),
// or put the client-chosen part last.
func Join(sep string, fns ...Func) Func {
	if len(fns) == 0 {
		panic("keyfuncs: Join: no key functions")
	}
	for i, fn := range fns {
		if fn == nil {
			panic(fmt.Sprintf("keyfuncs: Join: nil Func at index %d", i))
		}
	}
	fns = append([]Func(nil), fns...)
	errEmpty := fmt.Errorf("%w: Join: every part is empty", ErrNoKey)
	return func(r Request) (string, error) {
		var buf [8]string
		parts := buf[:0]
		for i, fn := range fns {
			k, err := joinPart(fn, i, r)
			if err != nil {
				return "", err
			}
			parts = append(parts, k)
		}
		key := strings.Join(parts, sep)
		if key == "" {
			return "", errEmpty
		}
		return key, nil
	}
}

func joinPart(fn Func, i int, r Request) (string, error) {
	k, err := fn(r)
	if err != nil {
		return "", fmt.Errorf("keyfuncs: Join part %d: %w", i, err)
	}
	return k, nil
}

// valueFunc returns a Func over a single string value of the request, the
// part kind named name ("" for route, method and path), with the empty and
// length checks shared by Header, Query, Route, Method and Path. Its
// errors are built once, so the error paths allocate nothing.
func valueFunc(kind, name string, get func(Request) string) Func {
	errMissing := &SourceError{Kind: kind, Name: name, Err: ErrNoKey}
	errLong := &SourceError{Kind: kind, Name: name, Err: ErrKeyTooLong}
	return func(r Request) (string, error) {
		v := get(r)
		switch {
		case v == "":
			return "", errMissing
		case len(v) > MaxKeyLen:
			return "", errLong
		}
		return v, nil
	}
}
