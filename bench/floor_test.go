package bench

import (
	"context"
	"hash/maphash"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/internal/fastclock"
)

// BenchmarkMemoryFloor runs BenchmarkMemory's cases for floors beside the
// fastest peers and Tollgate, in one run. A floor is the least any keyed
// limiter with an exact clock does per decision, and nothing more: it
// reads the monotonic clock once, as memstore does (through the CPU's
// counter where fastclock can), finds the key's
// state, and decides under exclusion. It keeps no expiry, bound, eviction
// or result beyond allowed, so no real limiter is as fast; it shows how
// much of a target a design may spend on anything else. floor-mutex
// applies GCRA to one int64 in 64 shards of a map behind a mutex each
// (memstore's shape); floor-cas in a sync.Map, each state updated by
// compare-and-swap (the lock-free shape); floor-sliding is floor-mutex
// deciding by a sliding window counter, beside Tollgate's default sliding
// window (tollgate).
//
// Run it for a fixed number of decisions, as BenchmarkMemory's runs in
// BENCHMARKS.md are, so that every library makes as many.
//
//	go test -run '^$' -bench MemoryFloor -benchtime 500000x -count 7 . | tee floor.txt
//	benchstat -col /lib -filter '.unit:cpu-ns/op' floor.txt
func BenchmarkMemoryFloor(b *testing.B) {
	runCases(b, memCases(b), []library{
		{"tollgate-gcra", func(tb testing.TB, s scenario) decider { return newTollgateOf(tb, s, core.GCRA) }},
		{"sethvargo", newSethvargo},
		{"xrate-syncmap", newXRateSyncMap},
		{"floor-mutex", newFloorMutex},
		{"floor-cas", newFloorCAS},
		{"tollgate", newTollgate},
		{"floor-sliding", newFloorSliding},
	})
}

// floorRate is GCRA's emission interval and tolerance, in ns, for s's
// limit.
func floorRate(s scenario) (interval, tolerance int64) {
	quota, period, burst := s.limit()
	interval = int64(period) / quota
	return interval, burst * interval
}

// floorNow reads the floors' clock, in ns: the process's fastclock, the
// clock memstore reads, so that a floor spends no more on it than
// Tollgate does.
func floorNow() int64 { return fastclock.Shared().Nanos() }

// gcraStep returns the theoretical arrival time after a decision at now on
// tat, and whether it allows.
func gcraStep(tat, now, interval, tolerance int64) (int64, bool) {
	next := max(tat, now) + interval
	if next-now > tolerance {
		return tat, false
	}
	return next, true
}

type floorMutex struct {
	interval, tolerance int64
	sliding             bool  // a sliding window counter instead of GCRA
	quota, period       int64 // the sliding window's
	seed                maphash.Seed
	shards              [64]floorShard
}

type floorShard struct {
	mu sync.Mutex
	m  map[string]*floorState
	_  [48]byte // one cache line each
}

// floorState is a key's state: GCRA's theoretical arrival time in a, or
// the sliding window's number, previous and current counts.
type floorState struct{ a, b, c int64 }

func newFloorMutex(_ testing.TB, s scenario) decider {
	f := &floorMutex{seed: maphash.MakeSeed()}
	f.interval, f.tolerance = floorRate(s)
	for i := range f.shards {
		f.shards[i].m = make(map[string]*floorState)
	}
	return f
}

// newFloorSliding is floor-mutex deciding by a sliding window counter,
// Tollgate's default algorithm: the window's number and two counts, and
// the previous count weighed by the part of its window still in the
// sliding one (one multiplication and one division).
func newFloorSliding(tb testing.TB, s scenario) decider {
	f := newFloorMutex(tb, s).(*floorMutex)
	quota, period, _ := s.limit()
	f.sliding, f.quota, f.period = true, quota, int64(period)
	return f
}

func (f *floorMutex) allow(_ context.Context, key string) (bool, error) {
	sh := &f.shards[maphash.String(f.seed, key)&63]
	now := floorNow()
	sh.mu.Lock()
	st, ok := sh.m[key]
	if !ok {
		st = new(floorState)
		sh.m[key] = st
	}
	var allowed bool
	if f.sliding {
		allowed = slidingStep(st, now, f.quota, f.period)
	} else {
		st.a, allowed = gcraStep(st.a, now, f.interval, f.tolerance)
	}
	sh.mu.Unlock()
	return allowed, nil
}

// slidingStep decides one unit at now on a sliding window counter of
// quota per period.
func slidingStep(st *floorState, now, quota, period int64) bool {
	w := now / period
	if w != st.a {
		if w == st.a+1 {
			st.b = st.c
		} else {
			st.b = 0
		}
		st.a, st.c = w, 0
	}
	if st.b*(period-(now-w*period))/period+st.c >= quota {
		return false
	}
	st.c++
	return true
}

type floorCAS struct {
	interval, tolerance int64
	m                   sync.Map // string → *atomic.Int64
}

func newFloorCAS(_ testing.TB, s scenario) decider {
	f := &floorCAS{}
	f.interval, f.tolerance = floorRate(s)
	return f
}

func (f *floorCAS) allow(_ context.Context, key string) (bool, error) {
	_, allowed := f.decide(key)
	return allowed, nil
}

// decide decides one unit for key, and returns how far its theoretical
// arrival time is ahead of now after the decision.
func (f *floorCAS) decide(key string) (ahead int64, allowed bool) {
	v, ok := f.m.Load(key)
	if !ok {
		v, _ = f.m.LoadOrStore(key, new(atomic.Int64))
	}
	tat := v.(*atomic.Int64)
	now := floorNow()
	for {
		old := tat.Load()
		next, allowed := gcraStep(old, now, f.interval, f.tolerance)
		if !allowed || tat.CompareAndSwap(old, next) {
			return max(next-now, 0), allowed
		}
	}
}

// floorMiddleware is the least a net/http rate-limiting middleware with
// draft-11 headers does per request (BenchmarkHTTP's floor): it takes the
// IPv4 peer address from RemoteAddr, decides as floor-cas does (GCRA on one
// int64), and writes RateLimit-Policy (a constant) and RateLimit, with
// remaining units and seconds to reset formatted. It has no key function,
// no trusted proxies, no denial response, no hooks and no errors; it
// allocates the RateLimit value (2 allocations), where Tollgate's guard
// lends it from a pool.
func floorMiddleware(quota int64, period time.Duration, h http.Handler) http.Handler {
	f := &floorCAS{interval: int64(period) / quota, tolerance: int64(period)}
	policy := []string{`"default";q=` + strconv.FormatInt(quota, 10) + `;w=` + strconv.FormatInt(int64(period/time.Second), 10)}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			http.Error(w, "bad peer", http.StatusInternalServerError)
			return
		}
		if !ap.Addr().Is4() {
			http.Error(w, "not IPv4", http.StatusInternalServerError)
			return
		}
		key := r.RemoteAddr[:strings.LastIndexByte(r.RemoteAddr, ':')]
		ahead, allowed := f.decide(key)
		var buf [64]byte
		b := append(buf[:0], `"default";r=`...)
		b = strconv.AppendInt(b, max(f.tolerance-ahead, 0)/f.interval, 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, (ahead+int64(time.Second)-1)/int64(time.Second), 10)
		hdr := w.Header()
		hdr["Ratelimit-Policy"] = policy
		hdr["Ratelimit"] = []string{string(b)}
		if !allowed {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		h.ServeHTTP(w, r)
	})
}
