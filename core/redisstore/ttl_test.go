package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// TestKeysExpire runs traffic on every algorithm (Redis TIME), checks that
// every key carries a TTL meanwhile, stops, waits past the longest time to
// full replenishment plus twice the margin, and finds no key left.
func TestKeysExpire(t *testing.T) {
	c := newClient(t)
	const margin, opTTL = 200 * time.Millisecond, 300 * time.Millisecond
	s := newStore(t, c, WithMargin(margin), WithOpTTL(opTTL))
	limits := []core.Limit{
		core.Per(20, 500*time.Millisecond).WithAlgorithm(core.FixedWindow),
		core.Per(20, 500*time.Millisecond), // SlidingWindow: replenished within 2 periods
		core.Per(20, 500*time.Millisecond).WithAlgorithm(core.SlidingLog),
		core.Per(20, 500*time.Millisecond).WithAlgorithm(core.BucketedWindow).WithPrecision(50 * time.Millisecond),
		core.Per(20, 500*time.Millisecond).WithAlgorithm(core.TokenBucket),
		core.Per(20, 500*time.Millisecond).WithAlgorithm(core.GCRA).WithBurst(5),
		core.Per(20, 500*time.Millisecond).WithAlgorithm(core.LeakyBucket),
	}
	ctx := context.Background()
	stop := time.Now().Add(600 * time.Millisecond)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last time.Time // when the last limit is fully replenished, by the decisions
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Paced and bounded: Charges pass over a limit, so unbounded
			// traffic would push replenishment out by up to DebtFactor
			// periods, the faster the machine the further.
			for i := 0; i < 200 && time.Now().Before(stop); i++ {
				time.Sleep(2 * time.Millisecond)
				key := fmt.Sprintf("ttl-%d", (w*7+i)%10)
				kind := []engine.Kind{engine.Take, engine.Take, engine.Take, engine.Refund, engine.Peek, engine.Take, engine.Take, engine.Take, engine.Peek, engine.Charge}[i%10]
				// Each limit alone, and all together, so that single- and
				// multi-limit keys both exist.
				ls := limits
				if i%2 == 0 {
					ls = limits[i%len(limits) : i%len(limits)+1]
					key += "-" + ls[0].Algorithm.String()
				}
				d, err := s.Apply(ctx, engine.Op{Plan: planOf("", ls...), Kind: kind, Key: key, Cost: 1 + int64(i%3)})
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				at := time.Now()
				mu.Lock()
				if r := at.Add(time.Duration(d.Reset) * time.Microsecond); r.After(last) {
					last = r
				}
				for _, l := range d.Limits {
					if r := at.Add(time.Duration(l.Reset) * time.Microsecond); r.After(last) {
						last = r
					}
				}
				mu.Unlock()
			}
		}()
	}
	checked := 0
	for time.Now().Before(stop.Add(-100 * time.Millisecond)) {
		for _, k := range scan(t, c, s.prefix) {
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if ttl == -1 { // -2: expired or deleted since SCAN, fine
				t.Errorf("key %q has no TTL", k)
			}
			checked++
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	if checked == 0 {
		t.Fatal("no key seen during traffic")
	}
	wait := time.Until(last) + 2*margin + 100*time.Millisecond
	if wait > 10*time.Second {
		t.Fatalf("the traffic left limits replenished only in %v", time.Until(last))
	}
	time.Sleep(max(wait, opTTL))
	for _, k := range scan(t, c, s.prefix) {
		ttl, _ := c.PTTL(ctx, k).Result()
		t.Errorf("key %q is left %v after the last limit was fully replenished (PTTL %v)", k, 2*margin+100*time.Millisecond, ttl)
	}
}

// A key's TTL stays within [need, need + margin], need being its time to
// full replenishment plus the margin: a write whose need the TTL covers
// keeps it, one whose need passed it sets it to need + margin, as does
// one that finds a TTL longer than that, whatever set it. With a margin of
// 0, or before Redis 7, every write sets the TTL to the need.
func TestKeysKeepTheirTTLWithinAMargin(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	// A unit is 250 ms of replenishment: a Take of one moves the need by
	// that much, less than the margin; one of four by more.
	plan := planOf("", core.Per(4, time.Second).WithAlgorithm(core.GCRA).WithBurst(40))
	// Margin 0 on every Redis, and any margin before Redis 7 (the band
	// needs REDIS_VERSION_NUM: apply.lua.tmpl): every write sets the TTL
	// to the need.
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, v, _ := strings.Cut(info, "redis_version:")
	major, _, _ := strings.Cut(v, ".")
	band := len(major) > 1 || major >= "7"
	exactly := func(s *Store, margin int64) {
		t.Helper()
		for range 3 {
			start := time.Now()
			r, err := s.Apply(ctx, engine.Op{Plan: plan, Kind: engine.Take, Key: "exact", Cost: 1})
			if err != nil {
				t.Fatal(err)
			}
			ttl, err := c.PTTL(ctx, s.stateKey("", "exact")).Result()
			if err != nil {
				t.Fatal(err)
			}
			need, el := (r.Reset+999)/1000+margin, time.Since(start).Milliseconds()
			if p := ttl.Milliseconds(); p <= 0 || p > need || p < need-el-1 {
				t.Errorf("margin %d ms: PTTL %v, want the need, %d ms, less the time since the call (%d ms)", margin, ttl, need, el)
			}
		}
	}
	exactly(newStore(t, c, WithMargin(0)), 0)
	if !band {
		exactly(newStore(t, c, WithMargin(time.Second)), 1000)
		return
	}
	const margin = time.Second
	m := margin.Milliseconds()
	s := newStore(t, c, WithMargin(margin))
	key := s.stateKey("", "band")
	// take returns the need, the PTTL, when the call began and when the
	// PTTL was about to be read and was read (the TTL it gives is the
	// key's at some instant between the two).
	type taken struct {
		need, pttl    int64
		start, b4, at time.Time
	}
	take := func(cost int64) taken {
		t.Helper()
		start := time.Now()
		r, err := s.Apply(ctx, engine.Op{Plan: plan, Kind: engine.Take, Key: "band", Cost: cost})
		if err != nil || !r.Allowed {
			t.Fatalf("Take %d: %+v, %v", cost, r, err)
		}
		b4 := time.Now()
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		x := taken{(r.Reset+999)/1000 + m, ttl.Milliseconds(), start, b4, time.Now()}
		if el := x.at.Sub(start).Milliseconds(); x.pttl < x.need-el-1 || x.pttl > x.need+m {
			t.Errorf("Take %d: PTTL %d ms, %d ms after the call began; want within [%d, %d]", cost, x.pttl, el, x.need, x.need+m)
		}
		return x
	}
	// set reports whether x's write set the TTL to the band's top.
	set := func(x taken) bool { return x.pttl >= x.need+m-x.at.Sub(x.start).Milliseconds()-1 }
	x1 := take(1) // a new key: need + margin
	if !set(x1) {
		t.Errorf("a new key's PTTL %d ms, want %d less the time since the call", x1.pttl, x1.need+m)
	}
	// Within the band: kept, so the second PTTL is the first less the time
	// between the reads.
	if x2 := take(1); x2.pttl > x1.pttl+1 || x2.pttl < x1.pttl-x2.at.Sub(x1.b4).Milliseconds()-2 {
		t.Errorf("a Take within the band moved the TTL from %d to %d ms (%v later)", x1.pttl, x2.pttl, x2.at.Sub(x1.b4))
	}
	if x3 := take(4); !set(x3) { // past it: set anew, a margin above the need
		t.Errorf("a Take past the band set PTTL %d ms, want %d less the time since the call", x3.pttl, x3.need+m)
	}
	if err := c.PExpire(ctx, key, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if x4 := take(1); !set(x4) { // above it: brought back (take checks the band)
		t.Errorf("a Take on a key of a TTL above the band set PTTL %d ms, want %d less the time since the call", x4.pttl, x4.need+m)
	}
}
