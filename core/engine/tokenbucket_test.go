package engine_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/engine"
)

// TokenBucket: B tokens, starting full, refilled at Q per P:
// tokens(t) = min(B, tokens + (t−last)·Q/P). c passes when tokens(t) ≥ c.
// With Q=3, P=1s a token takes 333333.33…µs; the state counts
// tokens × 1e6, refilled by 3 per µs, so the instants are exact: the
// k-th token after empty arrives at ⌈k·1e6/3⌉µs.
func TestTokenBucketSteps(t *testing.T) {
	const ms, us = time.Millisecond, time.Microsecond
	l := core.PerSecond(3).WithAlgorithm(core.TokenBucket) // Q=3, P=1s, B=3
	runTable(t, l, []row{
		{"the bucket starts full and a burst of 3 empties it", 0, engine.Take, 3, ok(0, time.Second)},
		{"an empty bucket waits ⌈1e6/3⌉ = 333334µs for a token", 0, engine.Take, 1, denied(0, time.Second, 333_334*us)},
		// 333333µs·3 = 999999 < 1e6: 1µs short. Full again after
		// ⌈(3e6 − 999999)/3⌉ = 666667µs.
		{"at 333333µs the token is one µs short", 333_333 * us, engine.Take, 1, denied(0, 666_667*us, 1*us)},
		// 333334·3 = 1000002 ≥ 1e6: taken, 2 left (in millionths). Full after
		// ⌈(3e6−2)/3⌉ = 1e6µs.
		{"at 333334µs the token has arrived", 333_334 * us, engine.Take, 1, ok(0, time.Second)},
		// 2 + 333333·3 = 1000001: one token. Full after ⌈1999999/3⌉ = 666667µs.
		{"at 666667µs one token is there again", 666_667 * us, engine.Peek, 1, ok(1, 666_667*us)},
		// Two tokens need 2e6 − 1000001 = 999999 more: ⌈999999/3⌉ = 333333µs.
		{"a weighted cost of 2 waits for the second token", 666_667 * us, engine.Take, 2, denied(1, 666_667*us, 333_333*us)},
		{"and passes when it has arrived", time.Second, engine.Take, 2, ok(0, time.Second)}, // exactly 2e6: empty
		// tokens 0 − 3 = −3: 3 tokens of debt take 1s to repay; full after 2s.
		{"a post-hoc charge goes into debt", time.Second, engine.Charge, 3, denied(0, 2*time.Second, time.Second)},
		// −3e6 + 1.5e6 = −1.5e6; a token needs 2.5e6 more: ⌈2.5e6/3⌉.
		{"half a second later a token is still 833334µs away", 1500 * ms, engine.Take, 1, denied(0, 1500*ms, 833_334*us)},
		{"a refund of 2 repays the debt", 1500 * ms, engine.Refund, 2, ok(0, 833_334*us)}, // 0.5e6: full after ⌈2.5e6/3⌉
		{"a refund beyond full stops at full", 1500 * ms, engine.Refund, 5, ok(3, 0)},
		{"a cost above the burst is denied for ever", 5 * time.Second, engine.Take, 4, denied(3, 0, core.Never)},
		{"cost 0 on a full bucket is allowed", 5 * time.Second, engine.Take, 0, ok(3, 0)},
		{"a cost of 1 leaves 2", 5 * time.Second, engine.Take, 1, ok(2, 333_334*us)},
		{"reset fills the bucket", 5 * time.Second, engine.Reset, 0, ok(3, 0)},
	})
}

// A Burst above Quota lets a burst of Burst pass after a quiet spell, then
// refills at Quota per Period.
func TestTokenBucketBurst(t *testing.T) {
	const ms = time.Millisecond
	l := core.PerSecond(2).WithBurst(5).WithAlgorithm(core.TokenBucket) // 1 token per 500ms
	runTable(t, l, []row{
		{"a burst of 5 passes at once", 0, engine.Take, 5, ok(0, 2500*ms)},
		{"the sixth waits one emission interval", 0, engine.Take, 1, denied(0, 2500*ms, 500*ms)},
		{"after 1.2s two tokens are back and 0.4 of a third", 1200 * ms, engine.Take, 3, denied(2, 1300*ms, 300*ms)},
		{"the bucket never holds more than the burst", time.Hour, engine.Take, 5, ok(0, 2500*ms)},
	})
}
