package engine

// Integer helpers shared by the algorithms. Validate and the debt cap keep
// the quantities they see within 2^53 in magnitude, so the same arithmetic
// done in IEEE doubles, as the Redis store's Lua does, is exact too. (A
// wide limit's products pass 2^53: see wide.go.)

// floorDiv returns ⌊a/b⌋ for b > 0, rounding toward negative infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv returns ⌈a/b⌉ for b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}

// floorMod returns a − b·⌊a/b⌋, which is in [0, b) for b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
