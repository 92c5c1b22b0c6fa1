package echolimit

import (
	"errors"
	"fmt"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/keyfuncs"
)

// Context returns the echo.Context behind r, a request the middleware of
// this package hands to key, cost and skip functions and to hooks; nil for
// any other keyfuncs.Request. It lets a keyfuncs.Func reach echo.
func Context(r keyfuncs.Request) echo.Context {
	if x, ok := r.(*gate); ok {
		return x.c
	}
	return nil
}

// errNotEcho is returned by the functions of KeyFunc and Value when they
// are called with a request that does not come from this package.
var errNotEcho = errors.New("echolimit: key function called with a request not from echolimit")

// KeyFunc adapts a key function over echo.Context to a keyfuncs.Func, for
// WithRule, guard.Optional and keyfuncs.Join:
//
//	echolimit.WithRule(userLim, echolimit.KeyFunc(func(c echo.Context) (string, error) {
//		return c.Param("tenant"), nil
//	}))
//
// As for every key function, an error or an empty key fails the request
// (by default with 400, see guard.ErrorStatus); it never passes unlimited.
// KeyFunc(nil) is nil, which WithKey and WithRule reject.
func KeyFunc(fn func(c echo.Context) (string, error)) keyfuncs.Func {
	if fn == nil {
		return nil
	}
	return func(r keyfuncs.Request) (string, error) {
		c := Context(r)
		if c == nil {
			return "", errNotEcho
		}
		return fn(c)
	}
}

// Value returns a key function whose key is c.Get(key): a value an earlier
// middleware stored with c.Set(key, v), typically the user or tenant an
// authentication middleware found:
//
//	e.Use(auth) // c.Set("user", "alice")
//	e.Use(echolimit.New(lim, echolimit.WithKey(echolimit.Value("user"))))
//
// The value must be a string or implement fmt.Stringer. A missing value, a
// nil one, an empty string or a value of another type yields an error
// matching keyfuncs.ErrNoKey (a 400, or, wrapped in guard.Optional, a rule
// the request is exempt from); a value longer than keyfuncs.MaxKeyLen one
// matching keyfuncs.ErrKeyTooLong. For other types (a *jwt.Token, say),
// derive the key with WithKeyFunc.
func Value(key string) keyfuncs.Func {
	return keyfuncs.Lookup(fmt.Sprintf("echo context value %q", key), func(r keyfuncs.Request) (any, error) {
		c := Context(r)
		if c == nil {
			return nil, errNotEcho
		}
		return c.Get(key), nil
	})
}
