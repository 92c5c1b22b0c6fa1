package fiberlimit

import (
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/tollgate/tollgate/keyfuncs"
)

// KeyFunc adapts a key function over *fiber.Ctx to a keyfuncs.Func, for
// WithRule, guard.Optional and keyfuncs.Join (WithKeyFunc takes such a
// function as is). The key fn returns is
// copied, so fn may return a string that points into the request, as
// c.Get, c.Params and c.Query do. An empty key is an error matching
// keyfuncs.ErrNoKey (the request fails with 400, see guard.ErrorStatus), a
// key longer than keyfuncs.MaxKeyLen one matching keyfuncs.ErrKeyTooLong.
//
//	fiberlimit.KeyFunc(func(c *fiber.Ctx) (string, error) {
//		return c.Params("tenant"), nil
//	})
//
// KeyFunc(nil) is nil, which WithKey and WithRule reject.
func KeyFunc(fn func(c *fiber.Ctx) (string, error)) keyfuncs.Func {
	if fn == nil {
		return nil
	}
	return func(r keyfuncs.Request) (string, error) {
		c := Ctx(r)
		if c == nil {
			return "", errNotFiber
		}
		k, err := fn(c)
		switch {
		case err != nil:
			return "", err
		case k == "":
			return "", errNoKey
		case len(k) > keyfuncs.MaxKeyLen:
			return "", errKeyTooLong
		}
		return strings.Clone(k), nil
	}
}

var (
	errNoKey      = fmt.Errorf("%w: the key function returned an empty key", keyfuncs.ErrNoKey)
	errKeyTooLong = fmt.Errorf("%w: the key function returned more than %d bytes", keyfuncs.ErrKeyTooLong, keyfuncs.MaxKeyLen)
)

// Locals returns a key function whose key is the value an earlier
// middleware stored with c.Locals(key, value), typically a user or tenant
// ID set by authentication:
//
//	app.Use(auth) // c.Locals("user", id)
//	app.Use(fiberlimit.New(lim, fiberlimit.WithKey(fiberlimit.Locals("user"))))
//
// The value must be a string or implement fmt.Stringer. A missing value, a
// nil one, an empty string or a value of another type yields an error
// matching keyfuncs.ErrNoKey (400; wrap with guard.Optional to exempt such
// requests from a rule instead); a value longer than keyfuncs.MaxKeyLen one
// matching keyfuncs.ErrKeyTooLong. The key is copied. It is
// keyfuncs.ContextValue for fiber's request-scoped values.
func Locals(key any) keyfuncs.Func {
	fn := keyfuncs.Lookup(fmt.Sprintf("fiber local %#v", key), func(r keyfuncs.Request) (any, error) {
		c := Ctx(r)
		if c == nil {
			return nil, errNotFiber
		}
		return c.Locals(key), nil
	})
	return func(r keyfuncs.Request) (string, error) {
		k, err := fn(r)
		return strings.Clone(k), err // fasthttp may reuse the value's bytes
	}
}
