// Package compare compares values supplied by programs (contexts, stores,
// streams) without the panic == has for some of them.
package compare

import "reflect"

// Equal reports whether a == b, and false where == panics: on two values
// of one dynamic type that is not comparable, or that is but holds, in an
// interface field, values that are not. A pointer compares at once; any
// other value under a deferred recover, which allocates nothing when the
// values compare (reflect.Value.Comparable allocates for a struct, such as
// context.Background()'s); where they do not, the runtime's panic
// allocates its error.
func Equal(a, b any) bool {
	if t := reflect.TypeOf(a); t == nil || t.Kind() == reflect.Pointer {
		return a == b // a pointer (most contexts: cancel, timer, value), or nil: == cannot panic
	}
	return equalSlow(a, b)
}

// equalSlow is Equal for a value that is not a pointer.
func equalSlow(a, b any) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}
