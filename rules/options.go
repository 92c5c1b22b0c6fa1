package rules

import (
	"errors"
	"log/slog"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
)

// An Option configures a Set: what a program gives that a file cannot
// (functions, loggers, stores).
type Option func(*settings) error

type settings struct {
	logger    *slog.Logger
	clock     core.Clock
	limOpts   []core.Option
	guardOpts []guard.Option
	fallback  core.Store
	onReload  func(error)
}

// WithLogger sets the logger of Apply and Reload: one line for each, at
// Info when the new rules run and at Error when they do not and the
// running rules stay.
// It must not be nil. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) error {
		if l == nil {
			return errors.New("rules: WithLogger(nil)")
		}
		s.logger = l
		return nil
	}
}

// WithClock gives every limiter clock (core.WithClock): for tests. It must
// not be nil. Default: the store's clock.
func WithClock(clock core.Clock) Option {
	return func(s *settings) error {
		if clock == nil {
			return errors.New("rules: WithClock(nil)")
		}
		s.clock = clock
		return nil
	}
}

// WithLimiterOptions adds opts to the options of every limiter:
// core.WithErrorHook or core.WithBreaker, say. The file's settings (the
// name, the failure policy and timeout, the limits) are applied after
// them, and win; a limit given here never applies. Default: none.
func WithLimiterOptions(opts ...core.Option) Option {
	return func(s *settings) error {
		s.limOpts = append(s.limOpts, opts...)
		return nil
	}
}

// WithGuardOptions adds opts to the options of every route: hooks, a
// denied or error handler, a max delay. The file's settings (headers, cost,
// dry run, the limiters and their keys) are applied after them, and win.
// Default: none.
func WithGuardOptions(opts ...guard.Option) Option {
	return func(s *settings) error {
		s.guardOpts = append(s.guardOpts, opts...)
		return nil
	}
}

// WithFallbackStore sets the store of limiters whose failure policy is
// fallback. The Set does not close it. Default: a memstore the Set creates
// when a limiter first needs it, and closes in Close.
func WithFallbackStore(store core.Store) Option {
	return func(s *settings) error {
		if store == nil {
			return errors.New("rules: WithFallbackStore(nil)")
		}
		s.fallback = store
		return nil
	}
}

// WithOnReload calls fn after every reload from the file (Reload, and
// those ReloadOn and Watch start), with its error, nil when the new rules
// run. fn must not be nil. Default: none.
func WithOnReload(fn func(err error)) Option {
	return func(s *settings) error {
		if fn == nil {
			return errors.New("rules: WithOnReload(nil)")
		}
		s.onReload = fn
		return nil
	}
}
