package rules_test

import (
	"context"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/rules"
)

func TestWatchReloadsAChangedFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reloads := make(chan error, 10)
		f := newFixture(t, limitsOf("5/m", "10/m"), rules.WithOnReload(func(err error) { reloads <- err }))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if err := f.set.Watch(ctx, time.Second); err != nil {
			t.Fatalf("Watch() = %v", err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if len(reloads) != 0 {
			t.Fatalf("Watch reloaded an unchanged file %d times", len(reloads))
		}

		f.write(t, limitsOf("7/m", "10/m"))
		time.Sleep(time.Second)
		synctest.Wait()
		if err := <-reloads; err != nil {
			t.Fatalf("the reload of a changed file = %v", err)
		}
		if got := f.set.Config().Limits("a", ""); got[0].Quota != 7 {
			t.Errorf("after the watched file changed, limiter a's limits = %v, want 7/m", got)
		}

		f.write(t, limitsOf("0/m", "10/m"))
		time.Sleep(time.Second)
		synctest.Wait()
		if err := <-reloads; err == nil {
			t.Errorf("the reload of a bad file = nil, want its error")
		}
		if got := f.set.Config().Limits("a", ""); got[0].Quota != 7 {
			t.Errorf("after the watched file went bad, limiter a's limits = %v, want 7/m still", got)
		}

		cancel()
		synctest.Wait()
		f.write(t, limitsOf("9/m", "10/m"))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if len(reloads) != 0 {
			t.Errorf("Watch reloaded after its context was done")
		}
	})
}

func TestWatchRejectsAnIntervalThatIsNotPositive(t *testing.T) {
	f := newFixture(t, limitsOf("5/m", "10/m"))
	if err := f.set.Watch(t.Context(), 0); err == nil {
		t.Errorf("Watch(0) = nil, want an error")
	}
}

func TestWatchWaitsOutAMissingFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reloads := make(chan error, 10)
		f := newFixture(t, limitsOf("5/m", "10/m"), rules.WithOnReload(func(err error) { reloads <- err }))
		if err := f.set.Watch(t.Context(), time.Second); err != nil {
			t.Fatalf("Watch() = %v", err)
		}
		if err := os.Remove(f.path); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if len(reloads) != 0 {
			t.Fatalf("Watch reloaded a missing file: %v", <-reloads)
		}
		f.write(t, limitsOf("6/m", "10/m"))
		time.Sleep(time.Second)
		synctest.Wait()
		if err := <-reloads; err != nil {
			t.Fatalf("the reload of the file back = %v", err)
		}
		if got := f.set.Config().Limits("a", ""); got[0].Quota != 6 {
			t.Errorf("after the file came back, limiter a's limits = %v, want 6/m", got)
		}
	})
}
