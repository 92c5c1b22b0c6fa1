package selftest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisUp checks what a program served on a healthy Redis logged and
// stored: that its decisions reached the Redis of rdb (it holds keys under
// prefix) and that the only store failures logged, if any, are timeouts.
// A loaded machine (a CI runner) may hold a call past the limiter's
// timeout, which the failure policy then answers, as the program means it
// to; any other failure is a fault of the program.
func RedisUp(rdb redis.UniversalClient, prefix string, log *Log) error {
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if line != "" && !strings.Contains(line, "context deadline exceeded") {
			return fmt.Errorf("store failures: %s", log.String())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, _, err := rdb.Scan(ctx, 0, prefix+"*", 1000).Result()
	if err != nil {
		return fmt.Errorf("SCAN %s*: %w", prefix, err)
	}
	if len(keys) == 0 {
		// SCAN may return an empty first page with a cursor; KEYS is
		// fine on a test server.
		if keys, err = rdb.Keys(ctx, prefix+"*").Result(); err != nil {
			return fmt.Errorf("KEYS %s*: %w", prefix, err)
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("no key under %q in Redis: no decision reached it (store log: %q)", prefix, log.String())
	}
	return nil
}
