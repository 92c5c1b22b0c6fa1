package redisstore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tollgate/tollgate/internal/ratelog"
)

// GoRedisLogger returns a logger for go-redis's own lines, to pass to
// redis.SetLogger: it writes them to l at debug level, at most a line a
// second per kind (their format) with a count of the rest. go-redis logs
// through the standard log package by default, and while Redis is down
// it prints a line per failed dial ("connection pool: failed to dial"),
// beside the Limiter's one line per cause: this quiets them, and keeps
// them for whoever turns on debug logs. redis.SetLogger is process-wide,
// so call it once, at startup:
//
//	redis.SetLogger(redisstore.GoRedisLogger(slog.Default()))
//
// l must not be nil: to drop go-redis's lines, pass
// slog.New(slog.DiscardHandler).
func GoRedisLogger(l *slog.Logger) *RedisLogger {
	return &RedisLogger{log: ratelog.New(l)}
}

// A RedisLogger writes go-redis's lines to a slog.Logger (GoRedisLogger).
// It is safe for concurrent use.
type RedisLogger struct{ log *ratelog.Logger }

// Printf writes one of go-redis's lines, as redis.SetLogger's interface
// asks.
func (r *RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	if !r.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	r.log.Log(ctx, "go-redis "+format, 1, slog.LevelDebug, "go-redis: "+fmt.Sprintf(format, v...))
}
