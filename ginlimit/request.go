package ginlimit

import (
	"context"
	"errors"
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/tollgate/tollgate/keyfuncs"
)

// request is the keyfuncs.Request of one request. It is a single
// pointer, so converting it to the interface allocates nothing, and the
// translated options below reach the *gin.Context again by a type
// assertion.
type request struct{ c *gin.Context }

var _ keyfuncs.UnixSocketRequest = request{}

// Method implements keyfuncs.Request.
func (x request) Method() string { return keyfuncs.FromHTTP(x.c.Request).Method() }

// Path implements keyfuncs.Request: the decoded URL path.
func (x request) Path() string { return keyfuncs.FromHTTP(x.c.Request).Path() }

// Route implements keyfuncs.Request with c.FullPath(), e.g.
// "/users/:id"; "" under NoRoute and NoMethod.
func (x request) Route() string { return x.c.FullPath() }

// Header implements keyfuncs.Request.
func (x request) Header(name string) string { return x.c.Request.Header.Get(name) }

// HeaderValues implements keyfuncs.Request.
func (x request) HeaderValues(name string) []string { return x.c.Request.Header.Values(name) }

// Query implements keyfuncs.Request with the semantics of c.Query, without
// parsing (and caching) the whole query.
func (x request) Query(name string) string { return keyfuncs.FromHTTP(x.c.Request).Query(name) }

// RemoteAddr implements keyfuncs.Request with the transport peer,
// c.Request.RemoteAddr: never c.ClientIP(), whose proxy trust is gin's
// engine configuration (see the package documentation).
func (x request) RemoteAddr() string { return x.c.Request.RemoteAddr }

// UnixSocket implements keyfuncs.UnixSocketRequest: whether the request
// came over a Unix socket (see keyfuncs.TrustUnixSocket).
func (x request) UnixSocket() bool { return keyfuncs.OnUnixSocket(x.c.Request) }

// Context implements keyfuncs.Request with c.Request.Context(): it ends
// with the request whatever gin's ContextWithFallback says.
func (x request) Context() context.Context { return x.c.Request.Context() }

// Context returns the *gin.Context behind r, a request that the middleware
// of this package hands to key, cost and skip functions, handlers and
// hooks; nil for any other keyfuncs.Request. It lets a function written
// against keyfuncs or guard reach gin:
//
//	guard.WithOnDenied(func(r keyfuncs.Request, d *guard.Denial) {
//		log.Printf("denied %s on %s", d.Key, ginlimit.Context(r).FullPath())
//	})
func Context(r keyfuncs.Request) *gin.Context {
	if x, ok := r.(request); ok {
		return x.c
	}
	return nil
}

// errNotGin is returned by the functions of KeyFunc when called with a
// request that does not come from this package.
var errNotGin = errors.New("ginlimit: KeyFunc called with a request not from ginlimit")

// KeyFunc adapts a key function over *gin.Context to a keyfuncs.Func, for
// WithRule, guard.Optional and keyfuncs.Join (WithKeyFunc takes such a
// function as is):
//
//	ginlimit.WithRule(userLim, guard.Optional(ginlimit.KeyFunc(func(c *gin.Context) (string, error) {
//		return c.GetString("user"), nil
//	})))
//
// The result follows the keyfuncs.Func contract: an empty key becomes an
// error matching keyfuncs.ErrNoKey (so that guard.Optional exempts the
// request from a rule instead of failing it), and a key longer than
// keyfuncs.MaxKeyLen one matching keyfuncs.ErrKeyTooLong. Either fails the
// request with 400 unless the rule is optional. KeyFunc(nil) is nil, which
// WithKey and WithRule reject.
func KeyFunc(fn func(c *gin.Context) (string, error)) keyfuncs.Func {
	if fn == nil {
		return nil
	}
	return func(r keyfuncs.Request) (string, error) {
		c := Context(r)
		if c == nil {
			return "", errNotGin
		}
		k, err := fn(c)
		switch {
		case err != nil:
			return "", err
		case k == "":
			return "", errEmptyKey
		case len(k) > keyfuncs.MaxKeyLen:
			return "", errLongKey
		}
		return k, nil
	}
}

// Value returns a key function whose key is the value an earlier
// middleware stored with c.Set(key, value), typically the user or tenant
// an authentication middleware found:
//
//	r.Use(auth) // c.Set("user", "alice")
//	r.Use(ginlimit.New(lim, ginlimit.WithKey(ginlimit.Value("user"))))
//
// The value must be a string or implement fmt.Stringer. A missing value, a
// nil one, an empty string or a value of another type yields an error
// matching keyfuncs.ErrNoKey (a 400, or, wrapped in guard.Optional, a rule
// the request is exempt from); a value longer than keyfuncs.MaxKeyLen one
// matching keyfuncs.ErrKeyTooLong. For other types, derive the key with
// WithKeyFunc.
func Value(key any) keyfuncs.Func {
	return keyfuncs.Lookup(fmt.Sprintf("gin context value %#v", key), func(r keyfuncs.Request) (any, error) {
		c := Context(r)
		if c == nil {
			return nil, errNotGin
		}
		v, _ := c.Get(key)
		return v, nil
	})
}

var (
	errEmptyKey = fmt.Errorf("ginlimit: %w: the key function returned an empty key", keyfuncs.ErrNoKey)
	errLongKey  = fmt.Errorf("ginlimit: %w: the key function returned more than %d bytes", keyfuncs.ErrKeyTooLong, keyfuncs.MaxKeyLen)
)
