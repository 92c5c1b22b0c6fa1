package compare_test

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/internal/compare"
)

type uncomparable struct {
	context.Context
	tags []string
}

// wrapped is a comparable struct type whose field may hold a value ==
// cannot compare.
type wrapped struct{ any }

func TestEqual(t *testing.T) {
	base := context.Background()
	derived := context.WithValue(base, struct{}{}, 1)
	odd := uncomparable{base, []string{"a"}}
	for _, tc := range []struct {
		name string
		a, b any
		want bool
	}{
		{"the same pointer", derived, derived, true},
		{"two pointers", derived, context.WithValue(base, struct{}{}, 1), false},
		{"a struct value and itself", base, base, true},
		{"nil and nil", nil, nil, true},
		{"a value and nil", base, nil, false},
		{"an uncomparable value and itself", odd, odd, false},
		{"an uncomparable value and another type", odd, base, false},
		{"a comparable struct holding an uncomparable value, and itself", wrapped{odd}, wrapped{odd}, false},
		{"a comparable struct holding a comparable value, and itself", wrapped{derived}, wrapped{derived}, true},
	} {
		if got := compare.Equal(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: Equal = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestEqualAllocatesNothingWhenValuesCompare(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for name, v := range map[string]any{"a pointer": ctx, "a struct value": context.Background()} {
		if n := testing.AllocsPerRun(100, func() { compare.Equal(v, v) }); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}
