package redisstore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
)

func TestZZProf(t *testing.T) {
	addr := os.Getenv("PROF_ADDR")
	if addr == "" {
		t.Skip()
	}
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 128})
	defer c.Close()
	ctx := context.Background()
	gcra := core.Per(1e9, 1e9).WithAlgorithm(core.GCRA)
	gcra = core.PerSecond(1e9).WithAlgorithm(core.GCRA)
	three := []core.Limit{gcra, core.PerMinute(1e9), core.PerHour(1e9).WithAlgorithm(core.FixedWindow)}
	for _, cs := range []struct {
		name   string
		limits []core.Limit
		ttl    int
	}{{"one", []core.Limit{gcra}, 5000}, {"one-norec", []core.Limit{gcra}, 0}, {"three", three, 5000}, {"three-norec", three, 0}} {
		s, _ := New(c, WithOpTTL(0), WithPrefix("prof:"), WithBatching(128, 4))
		if cs.ttl > 0 {
			s, _ = New(c, WithPrefix("prof:"), WithBatching(128, 4))
		}
		for i := 0; i < 1000; i++ {
			s.Apply(ctx, core.Op{Key: "k" + strconv.Itoa(i), Limits: cs.limits, Cost: 1})
		}
		c.ConfigResetStat(ctx)
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 3000; i++ {
					if _, err := s.Apply(ctx, core.Op{Key: "k" + strconv.Itoa((i*16+g)%1000), Limits: cs.limits, Cost: 1}); err != nil {
						panic(err)
					}
				}
			}()
		}
		wg.Wait()
		info := c.Info(ctx, "commandstats").Val()
		var out []string
		for _, l := range strings.Split(info, "\n") {
			if strings.HasPrefix(l, "cmdstat_") && !strings.Contains(l, "cmdstat_config") && !strings.Contains(l, "cmdstat_info") {
				f := strings.Split(strings.TrimSpace(l), ",")
				out = append(out, f[0]+" "+f[2])
			}
		}
		fmt.Println(cs.name, out)
		s.Close()
	}
}
