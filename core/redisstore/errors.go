package redisstore

import "errors"

// Sentinel errors of this package. Errors from Apply wrap them (or a
// go-redis error, or a core sentinel for invalid input) with the operation
// and key; match them with errors.Is.
var (
	// ErrReply reports a reply from Redis that is not what the script
	// returns: a wrong type or length. It means another program wrote the
	// store's keys, or a proxy mangled the reply.
	ErrReply = errors.New("redisstore: unexpected reply")
	// ErrConfig reports an invalid option or a nil client given to New.
	ErrConfig = errors.New("redisstore: invalid configuration")
)
