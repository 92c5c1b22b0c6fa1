package core

// Params are a Limit's numbers in the integer units the algorithms compute
// in, for stores that port Step to another language (the Redis store's Lua
// receives them as script arguments, so the port does no validation and
// makes the same choice of time unit). Every value is below 2^53.
type Params struct {
	Algorithm Algorithm // the limit's algorithm
	Quota     int64     // Q, cost units per Period
	Capacity  int64     // most cost that can pass at once (Limit.Capacity)
	Period    int64     // P in µs
	// Tick is the time unit of SlidingWindow, TokenBucket, GCRA and
	// LeakyBucket, in µs: 1 unless Capacity × Period passes 2^47µs, then the
	// least power of ten up to 1s that divides Period and brings Capacity ×
	// Period in ticks within 2^47. PeriodTicks is Period in ticks.
	Tick, PeriodTicks int64
	// Precision is the BucketedWindow bucket size in µs and Buckets the
	// number of buckets per Period; 0 for the other algorithms.
	Precision, Buckets int64
	// Ident identifies the layout of the limit's state (State.Ident): a state
	// stored under another Ident is discarded and starts fresh. Never 0; it
	// may exceed 2^53, so ports compare it as a string or in halves.
	Ident uint64
}

// Params validates l's numbers, as Validate does except for Name, and
// returns them in the units Step computes in. The error wraps
// ErrInvalidLimit.
func (l Limit) Params() (Params, error) {
	var sh shape
	if err := l.compile(&sh); err != nil {
		return Params{}, err
	}
	return Params{
		Algorithm:   sh.alg,
		Quota:       sh.q,
		Capacity:    sh.cap,
		Period:      sh.p,
		Tick:        sh.tick,
		PeriodTicks: sh.pt,
		Precision:   sh.prec,
		Buckets:     sh.n,
		Ident:       sh.id,
	}, nil
}
