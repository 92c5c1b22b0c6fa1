package rules

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// ReloadOn reloads the rules (Reload) whenever the process receives one of
// sigs, until ctx is done: SIGHUP when sigs is empty. It returns at once,
// with an error wrapping ErrNoFile when the running rules come from Parse.
// Each reload's outcome is logged and passed to WithOnReload's function;
// a bad file leaves the running rules in place.
func (s *Set) ReloadOn(ctx context.Context, sigs ...os.Signal) error {
	if s.Config().path == "" {
		return fmt.Errorf("%w: ReloadOn needs rules from Load or Open", ErrNoFile)
	}
	if len(sigs) == 0 {
		sigs = []os.Signal{syscall.SIGHUP}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				_ = s.Reload() // logged and reported by Reload
			}
		}
	}()
	return nil
}

// Watch reads the running rules' file every interval, until ctx is done,
// and reloads it (Reload) when its content changed: an edit in place, or a
// new file renamed over it (a Kubernetes ConfigMap's symbolic links swap
// so). A file missing for a while (during a replacement) is not a reload;
// its next content is. A change that fails to load is reported once, not
// on every tick, and the running rules stay until the content changes
// again. Watch compares content, not modification times, so that no
// filesystem's timestamp granularity hides an edit; and it polls rather
// than asks the OS for events, for no dependency and the same behaviour
// everywhere, at the cost of noticing a change up to interval late.
//
// It returns at once, with an error wrapping ErrNoFile when the running
// rules come from Parse, or an error for an interval that is not
// positive.
func (s *Set) Watch(ctx context.Context, interval time.Duration) error {
	path := s.Config().path
	switch {
	case path == "":
		return fmt.Errorf("%w: Watch needs rules from Load or Open", ErrNoFile)
	case interval <= 0:
		return errors.New("rules: Watch: the interval must be positive")
	}
	last, _ := digest(path)
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			sum, err := digest(path)
			if err != nil || sum == last {
				continue // unchanged, or being replaced: wait
			}
			last = sum
			_ = s.Reload() // logged and reported by Reload
		}
	}()
	return nil
}

// digest returns the SHA-256 of the file at path.
func digest(path string) ([sha256.Size]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(data), nil
}
