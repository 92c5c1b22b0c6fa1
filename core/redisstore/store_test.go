package redisstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
	"github.com/tollgate/tollgate/core/storetest"
)

// Every go-redis client a user may hold satisfies Client.
var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (*redis.Ring)(nil)
	_        = func() Client { return redis.NewFailoverClient(&redis.FailoverOptions{}) }
)

func TestNewRejectsBadOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	tests := []struct {
		name   string
		client Client
		opts   []Option
	}{
		{"a nil client", nil, nil},
		{"a prefix with a brace", c, []Option{WithPrefix("a{b")}},
		{"a negative margin", c, []Option{WithMargin(-time.Second)}},
		{"a negative operation TTL", c, []Option{WithOpTTL(-time.Second)}},
		{"a zero maximum key length", c, []Option{WithMaxKeyLen(0)}},
		{"a zero batch size", c, []Option{WithBatching(0, 2)}},
		{"a negative batch size", c, []Option{WithBatching(-1, 2)}},
		{"negative batch workers", c, []Option{WithBatching(8, -1)}},
		{"a typed nil *redis.Client", (*redis.Client)(nil), nil},
		{"a typed nil *redis.ClusterClient", (*redis.ClusterClient)(nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is rejected", func(t *testing.T) {
			if _, err := New(tt.client, tt.opts...); !errors.Is(err, ErrConfig) {
				t.Errorf("New = %v, want an error wrapping ErrConfig", err)
			}
		})
	}
}

func TestTagsAreDistinctAndBraceFree(t *testing.T) {
	keys := []string{"a", "{a}", "\\(a\\)", "\\{a\\}", "a}", "}a", "{", "}", "\\", "\\\\", "\\#x", strings.Repeat("x", 300), strings.Repeat("x", 301)}
	seen := map[string]string{}
	for _, k := range keys {
		tg := tag(k, 256)
		if strings.ContainsAny(tg, "{}") {
			t.Errorf("tag(%q) = %q holds a brace", k, tg)
		}
		if other, ok := seen[tg]; ok {
			t.Errorf("tag(%q) = tag(%q) = %q", k, other, tg)
		}
		seen[tg] = k
	}
}

func TestScopedKeysAreDistinct(t *testing.T) {
	s := &Store{prefix: "p:", maxKeyLen: 256}
	pairs := [][2]string{{"", "a"}, {"a", "b"}, {"", `a\:b`}, {"", `a\\:b`}, {"a\\", ":b"}, {"a", `\:b`}, {"{", "}"}, {"", "{\\:}"}}
	seen := map[string][2]string{}
	for _, p := range pairs {
		k := s.stateKey(p[0], p[1])
		if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
			t.Errorf("stateKey(%q, %q) = %q: not one hash tag", p[0], p[1], k)
		}
		if other, ok := seen[k]; ok {
			t.Errorf("stateKey(%q, %q) = stateKey(%q, %q) = %q", p[0], p[1], other[0], other[1], k)
		}
		seen[k] = p
	}
}

// An operation's state key is stateKey's, byte for byte, whatever its
// scope and key hold: keys written by earlier versions stay the keys read.
func TestOperationsUseTheStateKeyLayout(t *testing.T) {
	s := &Store{prefix: "p:", maxKeyLen: 8}
	lim, err := storetest.Compile(core.PerSecond(5))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ scope, key, want string }{
		{"", "k", `p:{k}`},
		{"a{b", "k}", `p:{a\(b\:k\)}`},
		{`s\`, "123456789", `p:{s\\\:\#` + fmt.Sprintf("%x", sha256.Sum256([]byte("123456789"))) + `}`},
	} {
		plan, err := engine.NewPlan(c.scope, []engine.Limit{lim})
		if err != nil {
			t.Fatal(err)
		}
		got := s.newCall(&engine.Op{Plan: plan, Key: c.key, Cost: 1}).keys[0]
		if got != c.want || got != s.stateKey(c.scope, c.key) {
			t.Errorf("scope %q, key %q: the operation's key is %q, want %q (stateKey %q)", c.scope, c.key, got, c.want, s.stateKey(c.scope, c.key))
		}
	}
}

func TestDecodeRejectsBadReplies(t *testing.T) {
	op := engine.Op{Plan: planOf("", core.PerSecond(1)), Key: "k", Cost: 1}
	for _, reply := range []any{nil, "x", int64(1), []any{}, []any{int64(1), int64(0), int64(0)}, []any{int64(1), "0", int64(0), int64(0)}, []any{int64(1), nil, int64(0), int64(0)}} {
		if _, err := decode(&op, false, reply); !errors.Is(err, ErrReply) {
			t.Errorf("decode(%#v) = %v, want an error wrapping ErrReply", reply, err)
		}
	}
}

func TestServerTime(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	op := engine.Op{Plan: planOf("", core.PerMinute(3).WithAlgorithm(core.FixedWindow), core.PerSecond(10).WithAlgorithm(core.GCRA)), Key: "k", Cost: 2}
	// The second AllowN must fall in the first one's minute: in the next
	// one, it would be admitted.
	clearOfWindowEnd(t, c, time.Minute, 2*time.Second)
	d, err := s.Apply(ctx, op)
	if err != nil || !d.Allowed || d.Remaining != 1 || d.Reset <= 0 || d.Reset > time.Minute.Microseconds() {
		t.Fatalf("AllowN(Redis TIME, 2) = %+v, %v; want allowed, 1 remaining, reset within a minute", d, err)
	}
	d, err = s.Apply(ctx, op)
	if err != nil || d.Allowed || d.Retry <= 0 || d.Retry > time.Minute.Microseconds() {
		t.Fatalf("AllowN(Redis TIME, 2) again = %+v, %v; want denied until the next minute", d, err)
	}
}

func TestPeekOfAFreshKeyWritesNothing(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	limits := []core.Limit{core.PerSecond(5), core.PerSecond(5).WithAlgorithm(core.SlidingLog)}
	if _, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Kind: engine.Peek, Key: "k", Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if keys := scan(t, c, s.prefix); len(keys) != 0 {
		t.Errorf("Peek of a fresh key left keys %q", keys)
	}
	if _, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Key: "k", Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Kind: engine.Refund, Key: "k", Cost: 1}); err != nil {
		t.Fatal(err)
	}
	for _, k := range scan(t, c, s.prefix) {
		if !strings.Contains(k, "}:op:") { // operation records expire on their own
			t.Errorf("after Take and Refund of everything, key %q is left", k)
		}
	}
}

// scan returns the keys of the single Redis that start with prefix.
func scan(t testing.TB, c redis.Cmdable, prefix string) []string {
	t.Helper()
	var all []string
	iter := c.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		all = append(all, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	return all
}

func TestWrongTypeIsAnErrorNotAPanic(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	if err := c.HSet(ctx, s.stateKey("", "k"), "x", 1).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Apply(ctx, engine.Op{Plan: planOf("", core.PerSecond(1)), Key: "k", Cost: 1})
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Apply on a key of the wrong type = %v, want a WRONGTYPE error", err)
	}
}

// A Client may be a value of a type == cannot compare (a struct with a
// slice field, wrapping a client): the store never compares it, alone or
// under concurrent callers (inline and batched calls).
func TestAClientOfAnUncomparableType(t *testing.T) {
	s := newStore(t, taggedClient{newClient(t), []string{"tag"}})
	lim, err := core.New(s, core.PerMinute(1000))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if d, err := lim.Allow(context.Background(), "k"); err != nil || !d.Allowed {
					t.Errorf("Allow = %+v, %v; want allowed", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if d, err := lim.Peek(context.Background(), "k"); err != nil || d.Remaining != 1000-160 {
		t.Errorf("Peek = %d remaining, %v; want 840", d.Remaining, err)
	}
}

// taggedClient is a Client of a type == cannot compare.
type taggedClient struct {
	*redis.Client
	tags []string
}

// TestScriptFlushWhileServing flushes the script cache again and again while
// 16 goroutines decide: the store reloads its script (NOSCRIPT → EVAL),
// specialized or generic, and no decision is lost or doubled.
func TestScriptFlushWhileServing(t *testing.T) {
	c := newClient(t)
	for _, tc := range []struct {
		name    string
		batched bool
		generic bool
	}{{"unbatched", false, false}, {"batched", true, false}, {"generic script", true, true}} {
		opts := []Option{WithBatching(0, 0)}
		if tc.batched {
			opts = []Option{WithBatching(32, 2)}
		}
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, c, opts...)
			if tc.generic {
				s.maxScripts = 0
			}
			ctx := context.Background()
			const quota = 500
			// A unit every 518s: none comes back during the test, and
			// 500 × 72h is within 2^47µs, so that the limit is not wide
			// (which the generic script alone computes).
			limits := []core.Limit{core.Per(quota, 72*time.Hour).WithAlgorithm(core.GCRA)}
			if sc, _, _ := s.command(&engine.Op{Plan: planOf("", limits...), Key: "flush", Cost: 1}); (sc == generic) != tc.generic {
				t.Fatalf("the store runs the generic script: %v, want %v", sc == generic, tc.generic)
			}
			var admitted, failed atomic.Int64
			var wg sync.WaitGroup
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
						c.ScriptFlush(ctx)
						time.Sleep(time.Millisecond)
					}
				}
			}()
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 50 {
						d, err := s.Apply(ctx, engine.Op{Plan: planOf("", limits...), Key: "flush", Cost: 1})
						if err != nil {
							failed.Add(1)
							t.Errorf("Apply during SCRIPT FLUSH: %v", err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			if admitted.Load() != quota {
				t.Errorf("admitted %d of 800 attempts, want exactly %d", admitted.Load(), quota)
			}
		})
	}
}
