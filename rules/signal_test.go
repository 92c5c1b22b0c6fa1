//go:build unix

package rules_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/rules"
)

func TestReloadOnASignal(t *testing.T) {
	reloads := make(chan error, 1)
	f := newFixture(t, limitsOf("5/m", "10/m"), rules.WithOnReload(func(err error) { reloads <- err }))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := f.set.ReloadOn(ctx); err != nil { // SIGHUP, the default
		t.Fatalf("ReloadOn() = %v", err)
	}
	f.write(t, limitsOf("7/m", "10/m"))
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reloads:
		if err != nil {
			t.Fatalf("the reload on SIGHUP = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reload 10s after SIGHUP")
	}
	if got := f.set.Config().Limits("a", ""); got[0].Quota != 7 {
		t.Errorf("after SIGHUP, limiter a's limits = %v, want 7/m", got)
	}
}
