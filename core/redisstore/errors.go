package redisstore

import (
	"context"
	"errors"
	"fmt"
)

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
	// ErrExpired reports an operation that reached Redis after its caller's
	// deadline, which the script therefore refused: it changed nothing. The
	// Limiter treats it as a timeout.
	ErrExpired = fmt.Errorf("redisstore: operation refused past its deadline: %w", context.DeadlineExceeded)
	// ErrNotReplicated reports, with WithWait, an operation that ran on the
	// master but was not acknowledged by enough replicas in time: a
	// failover could lose it. For the first second of a node's replicas'
	// silence the call fails with it (the master keeps the change); past
	// it, the operation is decided and ErrNotReplicated is the Err of the
	// EventStoreFailure that reports it (see WithWait).
	ErrNotReplicated = errors.New("redisstore: operation not acknowledged by enough replicas")
	// ErrResent reports a state-changing operation that go-redis was about
	// to send a second time, after the first send failed in a way that
	// leaves unknown whether it ran (such as a connection closed before the
	// reply came back). The store does not send it again, so the operation
	// is applied at most once; like a timeout, the error goes to the
	// Limiter's failure policy. WithOpTTL makes such resends safe instead.
	ErrResent = errors.New("redisstore: operation not sent twice (its first send may have run)")
)
