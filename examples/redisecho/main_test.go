package main

import (
	"os"
	"testing"
)

// TestSelfTest needs a Redis server: TOLLGATE_REDIS_ADDR. Without it the
// test is skipped, unless TOLLGATE_REQUIRE_REDIS is 1.
func TestSelfTest(t *testing.T) {
	addr := os.Getenv("TOLLGATE_REDIS_ADDR")
	if addr == "" {
		if os.Getenv("TOLLGATE_REQUIRE_REDIS") == "1" {
			t.Fatal("TOLLGATE_REQUIRE_REDIS=1 but TOLLGATE_REDIS_ADDR is not set")
		}
		t.Skip("TOLLGATE_REDIS_ADDR is not set")
	}
	if err := selfTestUp(addr); err != nil {
		t.Fatal(err)
	}
}

// TestRedisDown needs no Redis: it checks the failure policies.
func TestRedisDown(t *testing.T) {
	if err := selfTestDown(); err != nil {
		t.Fatal(err)
	}
}
