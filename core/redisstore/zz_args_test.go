package redisstore

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
)

func TestZZArgs(t *testing.T) {
	s, _ := New(redis.NewClient(&redis.Options{}))
	gcra := core.PerSecond(1e9).WithAlgorithm(core.GCRA)
	three := []core.Limit{gcra, core.PerMinute(1e9), core.PerHour(1e9).WithAlgorithm(core.FixedWindow)}
	for _, l := range [][]core.Limit{{gcra}, three} {
		k, a := s.command(&core.Op{Key: "x", Limits: l, Cost: 1})
		fmt.Println(k, a)
	}
	fmt.Println(applySHA)
}
