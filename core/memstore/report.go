package memstore

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/core"
)

// ReportInterval is how often a Store reports its keys and evictions to
// its observers (WithObserver), and lossy evictions to its log
// (WithLogger).
const ReportInterval = time.Second

// DefaultName is the name a Store gives itself in its events and log
// lines unless WithName says otherwise.
const DefaultName = "memstore"

// WithObserver makes the store report to obs every ReportInterval, and
// once more at Close: its number of keys (core.EventKeys, as Len counts
// them) and the evictions since the previous report (core.EventEviction,
// one event for the lossless ones and one for the lossy ones, when there
// were any). Given several times, it reports to each. obs must not be nil
// (New panics). Default: none.
func WithObserver(obs core.Observer) Option {
	return func(c *config) {
		if obs == nil {
			c.bad = "WithObserver(nil)"
			return
		}
		c.obs = core.JoinObservers(c.obs, obs)
	}
}

// WithLogger makes the store log to logger its lossy evictions (see
// LossyEvictions): at most one line per ReportInterval (and one at Close),
// with their count.
// logger must not be nil (New panics): to log nothing, pass
// slog.New(slog.DiscardHandler). Default: slog.Default(), read when a line
// is written.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) {
		if logger == nil {
			c.bad = "WithLogger(nil): to log nothing, pass slog.New(slog.DiscardHandler)"
			return
		}
		c.logger = logger
	}
}

// WithName names the store in its events (core.Event.Store) and log lines,
// so that metrics tell stores apart: an application's store and a Fallback
// store, say. Default: DefaultName.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// report sends the observers the key count and the evictions since the
// last report, and logs the lossy ones.
func (s *Store) report() {
	ctx := context.Background()
	logger := s.logger
	if logger == nil {
		logger = slog.Default()
	}
	warn := logger.Enabled(ctx, slog.LevelWarn)
	if s.obs == nil && !warn {
		return
	}
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	all, lossy := s.evictions.Load(), s.lossy.Load()
	newLossy := lossy - s.reported[1]
	newLossless := all - s.reported[0] - newLossy
	s.reported = [2]int64{all, lossy}
	if s.obs == nil && newLossy == 0 {
		return
	}
	keys := int64(s.Len())
	if newLossy > 0 && warn {
		logger.LogAttrs(ctx, slog.LevelWarn,
			"memstore: keys evicted with usage: their next requests start with a whole quota; raise WithMaxKeys above the keys active within a period",
			slog.String("store", s.name), slog.Int64("count", newLossy), slog.Int64("keys", keys),
			slog.Int("max_keys", s.perShard*len(s.shards)))
	}
	if s.obs == nil {
		return
	}
	e := core.Event{Kind: core.EventKeys, Store: s.name, Keys: keys}
	s.obs.ObserveEvent(ctx, &e)
	if newLossless > 0 {
		e = core.Event{Kind: core.EventEviction, Store: s.name, Count: newLossless}
		s.obs.ObserveEvent(ctx, &e)
	}
	if newLossy > 0 {
		e = core.Event{Kind: core.EventEviction, Store: s.name, Count: newLossy, Lossy: true}
		s.obs.ObserveEvent(ctx, &e)
	}
}
