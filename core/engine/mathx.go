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

// divPos returns ⌊a/b⌋ and a mod b for a ≥ 0 and b > 0, by unsigned
// division: without floorDiv's and ceilDiv's corrections for a sign, and
// the check for b = −1 a signed division makes. The fast path divides so
// where its numerators cannot be negative.
func divPos(a, b int64) (q, r int64) {
	return int64(uint64(a) / uint64(b)), int64(uint64(a) % uint64(b))
}

// ceilPos returns ⌈a/b⌉ for a ≥ 0 and b > 0.
func ceilPos(a, b int64) int64 {
	q, r := divPos(a, b)
	if r != 0 {
		q++
	}
	return q
}

// unitsIn returns max(⌊a/b⌋, 0) for b > 0: the whole units of b in a
// room a that a debt may have made negative.
func unitsIn(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	q, _ := divPos(a, b)
	return q
}
