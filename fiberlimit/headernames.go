package fiberlimit

import (
	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/guard"
)

// guardNames are the header names a Guard sets, as it passes them to
// SetHeader and SetHeaderBytes.
var guardNames = [...]string{
	guard.HeaderRateLimit,
	guard.HeaderRateLimitPolicy,
	guard.HeaderRateLimitLimit,
	guard.HeaderRateLimitRemaining,
	guard.HeaderRateLimitReset,
	guard.HeaderXRateLimitLimit,
	guard.HeaderXRateLimitRemaining,
	guard.HeaderXRateLimitReset,
	guard.HeaderRetryAfter,
	guard.HeaderContentType,
}

// canonicalNames holds, for each of guardNames, its bytes when fasthttp's
// normalization leaves the name as it is (every one of them today), and
// nil otherwise. It is built once and never written again: fasthttp only
// copies a key it is given.
var canonicalNames = func() (names [len(guardNames)][]byte) {
	for i, n := range guardNames {
		if k := fasthttp.AppendNormalizedHeaderKey(nil, n); string(k) == n {
			names[i] = k
		}
	}
	return names
}()

// canonicalName returns the bytes of name for ResponseHeader.SetCanonical
// when name is one of the names a Guard sets and fasthttp's normalization
// leaves it as it is; nil otherwise. Such a name is sent as given whether
// normalizing is on or off (fiber's DisableHeaderNormalizing), so setting
// it with SetCanonical sends the same bytes SetBytesV would, without
// copying and normalizing the name on every call.
func canonicalName(name string) []byte {
	i := -1
	switch name {
	case guard.HeaderRateLimit:
		i = 0
	case guard.HeaderRateLimitPolicy:
		i = 1
	case guard.HeaderRateLimitLimit:
		i = 2
	case guard.HeaderRateLimitRemaining:
		i = 3
	case guard.HeaderRateLimitReset:
		i = 4
	case guard.HeaderXRateLimitLimit:
		i = 5
	case guard.HeaderXRateLimitRemaining:
		i = 6
	case guard.HeaderXRateLimitReset:
		i = 7
	case guard.HeaderRetryAfter:
		i = 8
	case guard.HeaderContentType:
		i = 9
	default:
		return nil
	}
	return canonicalNames[i]
}
