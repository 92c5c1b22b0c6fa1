package guard

import "errors"

// Sentinel errors. The errors a Guard hands to its ErrorHandler and OnError
// hook wrap one of them together with the underlying error, so both match
// with errors.Is: errors.Is(err, ErrKey) and errors.Is(err,
// keyfuncs.ErrNoKey), say. Their text is for logs; it never reaches a
// client.
var (
	// ErrKey reports that a rule's key function failed or returned an
	// empty key.
	ErrKey = errors.New("guard: key function failed")
	// ErrCost reports that the cost function failed or returned a
	// negative cost.
	ErrCost = errors.New("guard: cost function failed")
	// ErrLimiter reports that a Limiter call failed: invalid input (a
	// limit from WithLimitsFunc that does not validate) or a failing store,
	// including core.ErrUnavailable under a fail-closed policy.
	ErrLimiter = errors.New("guard: limiter failed")
	// ErrWait reports that a request queued by a LeakyBucket limit was
	// cancelled (its context ended) before its turn.
	ErrWait = errors.New("guard: wait cancelled")
)

// ErrInvalidOption reports an option New cannot accept: a nil function, a
// nil Limiter in a rule, a negative cost or delay. New's error wraps it
// and names the option; adapters panic with that error's text.
var ErrInvalidOption = errors.New("guard: invalid option")

// ErrNilLimiter reports a nil *core.Limiter given to New without
// WithAdaptive: nothing would limit the requests. Adapters panic with
// their own message for it.
var ErrNilLimiter = errors.New("guard: New: nil *core.Limiter")
