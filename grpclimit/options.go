package grpclimit

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/tollgate/tollgate/adaptive"
	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// An Option configures an interceptor. It is a guard.Option: every option
// of package guard works here too, including those over keyfuncs.Request
// (whose Path and Route are the full method, and whose Header reads the
// incoming metadata). Those below are the same options, or their
// translations to the RPC's context and full method name, e.g.
// "/helloworld.Greeter/SayHello". An option given a nil function makes
// the interceptor's constructor panic, naming the option: leave it out
// for its default.
type Option = guard.Option

// rpcOf returns the context and full method of r.
func rpcOf(r keyfuncs.Request) (context.Context, string) { return r.Context(), r.Path() }

// WithKey sets the key function to one of package keyfuncs:
//
//	grpclimit.WithKey(keyfuncs.Header("x-api-key"))                    // a metadata value
//	grpclimit.WithKey(keyfuncs.IP(keyfuncs.TrustProxies(lb)))          // behind a proxy
//	grpclimit.WithKey(keyfuncs.Join("|", keyfuncs.IP(), keyfuncs.Route())) // per peer and method
//
// keyfuncs.Header reads the incoming metadata (the name is matched case
// insensitively), keyfuncs.Route the full method. keyfuncs.IP reads the
// forwarding metadata (x-forwarded-for, forwarded, or the key of
// keyfuncs.FromHeader) only when the peer is a trusted proxy, exactly as
// it reads HTTP headers. It is guard.WithKey. Default: keyfuncs.IP(), the
// peer's address.
func WithKey(fn keyfuncs.Func) Option { return guard.WithKey(fn) }

// WithKeyFunc sets the key function, over the RPC's context and full
// method: who is limited, e.g. a user an authentication interceptor that
// runs first stored in the context:
//
//	grpclimit.WithKeyFunc(func(ctx context.Context, fullMethod string) (string, error) {
//		return userFrom(ctx), nil
//	})
//
// A key function's error, or an empty key, fails the RPC with
// InvalidArgument (see ErrorStatus); it never passes unlimited. For the
// functions of keyfuncs, use WithKey. Default: keyfuncs.IP(), the peer's
// address.
func WithKeyFunc(fn func(ctx context.Context, fullMethod string) (string, error)) Option {
	if fn == nil {
		return guard.Invalid("WithKeyFunc", "nil function")
	}
	return guard.WithKey(KeyFunc(fn))
}

// WithRule adds a further limiter applied to its own key, after lim
// (keyfuncs.IP() for a rule per peer). If a later rule denies, what the
// earlier rules took is refunded: see guard.WithRule. Use KeyFunc for a
// key function over the RPC's context, and guard.Optional to exempt RPCs
// without the key, e.g. anonymous ones from a per-user rule. Default:
// none.
func WithRule(lim *core.Limiter, fn keyfuncs.Func) Option { return guard.WithRule(lim, fn) }

// WithCost sets the static cost of every RPC, in cost units; it must not
// be negative. Default: 1.
func WithCost(n int64) Option { return guard.WithCost(n) }

// WithMethodCosts sets the cost of each RPC by its full method: costs
// maps full method names ("/package.Service/Method") to costs, and
// every other method costs others:
//
//	grpclimit.WithMethodCosts(map[string]int64{
//		"/search.v1.Search/Query":  5,
//		"/search.v1.Search/Export": 50,
//	}, 1)
//
// It replaces WithCost, whatever the order; of it and WithCostFunc, the
// last given wins. costs is copied. A negative cost, or a name that is not a full
// method name (a leading slash, a service and a method, nothing else),
// which no RPC would match, makes the constructor panic. Default: none.
func WithMethodCosts(costs map[string]int64, others int64) Option {
	for m, c := range costs {
		if c < 0 {
			return guard.Invalid("WithMethodCosts", fmt.Sprintf("negative cost %d for %q", c, m))
		}
		if !isFullMethod(m) {
			return guard.Invalid("WithMethodCosts", fmt.Sprintf("%q is not a full method name, want \"/package.Service/Method\"", m))
		}
	}
	if others < 0 {
		return guard.Invalid("WithMethodCosts", fmt.Sprintf("negative cost %d for other methods", others))
	}
	costs = maps.Clone(costs)
	return guard.WithCostFunc(func(r keyfuncs.Request) (int64, error) {
		if c, ok := costs[r.Path()]; ok {
			return c, nil
		}
		return others, nil
	})
}

// isFullMethod reports whether m has the shape of a full method name,
// "/service/method".
func isFullMethod(m string) bool {
	svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	return strings.HasPrefix(m, "/") && ok && svc != "" && method != "" && !strings.Contains(method, "/")
}

// WithCostFunc computes the cost of each RPC from its context (its
// metadata, say) and full method, replacing WithCost. An error fails the
// RPC with InvalidArgument, a negative cost with Internal; see
// guard.WithCostFunc. Default: none.
func WithCostFunc(fn func(ctx context.Context, fullMethod string) (int64, error)) Option {
	if fn == nil {
		return guard.Invalid("WithCostFunc", "nil function")
	}
	return guard.WithCostFunc(func(r keyfuncs.Request) (int64, error) { return fn(rpcOf(r)) })
}

// WithSkip passes RPCs for which fn reports true straight to the handler:
// no key, no decision, no metadata. E.g. health checks:
//
//	grpclimit.WithSkip(func(_ context.Context, m string) bool {
//		return strings.HasPrefix(m, "/grpc.health.v1.Health/")
//	})
//
// Default: none, every RPC is limited.
func WithSkip(fn func(ctx context.Context, fullMethod string) bool) Option {
	if fn == nil {
		return guard.Invalid("WithSkip", "nil function")
	}
	return guard.WithSkip(func(r keyfuncs.Request) bool { return fn(rpcOf(r)) })
}

// WithDeniedHandler replaces the error a denied RPC ends with: h returns
// it, a status error (status.Error) carrying the code the client should
// see; a nil error ends the RPC with DeniedStatus(d), the default. The
// rate-limit metadata and retry-after are set before h runs. Default:
// DeniedStatus(d).Err().
func WithDeniedHandler(h func(ctx context.Context, fullMethod string, d *guard.Denial) error) Option {
	if h == nil {
		return guard.Invalid("WithDeniedHandler", "nil function")
	}
	return guard.WithDeniedHandler(func(_ guard.Writer, r keyfuncs.Request, d *guard.Denial) error {
		ctx, m := rpcOf(r)
		if err := h(ctx, m, d); err != nil {
			return err
		}
		return DeniedStatus(d).Err()
	})
}

// WithErrorHandler replaces the error an RPC that cannot be decided ends
// with; err wraps guard.ErrKey, ErrCost, ErrLimiter or ErrWait. h must
// not send err's text to the client; a nil error ends the RPC as the
// default does. Default: ErrorStatus(err).Err(), or Canceled or
// DeadlineExceeded when the RPC's context ended.
func WithErrorHandler(h func(ctx context.Context, fullMethod string, err error) error) Option {
	if h == nil {
		return guard.Invalid("WithErrorHandler", "nil function")
	}
	return guard.WithErrorHandler(func(_ guard.Writer, r keyfuncs.Request, err error) error {
		ctx, m := rpcOf(r)
		if herr := h(ctx, m, err); herr != nil {
			return herr
		}
		return defaultErrorStatus(ctx, err).Err()
	})
}

// WithHeaders selects the rate-limit metadata: the header fields of the
// style, as lower-case metadata keys (guard.HeadersDraft06 sends
// ratelimit-limit, ratelimit-remaining, ratelimit-reset and
// ratelimit-policy; guard.HeadersNone nothing but retry-after on a
// denial). Default: guard.HeadersDraft11, ratelimit-policy and ratelimit.
func WithHeaders(style guard.HeaderStyle) Option { return guard.WithHeaders(style) }

// WithLegacyReset selects how guard.HeadersLegacy sends x-ratelimit-reset:
// seconds from now (guard.ResetDelta) or a Unix time (guard.ResetUnix).
// It is guard.WithLegacyReset. Default: guard.ResetDelta.
func WithLegacyReset(f guard.ResetFormat) Option { return guard.WithLegacyReset(f) }

// WithClock sets the clock of the dates the interceptor sends: the Unix
// time of WithLegacyReset(guard.ResetUnix). Decisions use their Limiter's
// clock. It is guard.WithClock. Default: the wall clock.
func WithClock(clock core.Clock) Option { return guard.WithClock(clock) }

// WithDryRun decides, counts and sets metadata but never blocks; see
// guard.WithDryRun. Default: false.
func WithDryRun(on bool) Option { return guard.WithDryRun(on) }

// WithMaxDelay bounds how long an RPC admitted by a LeakyBucket limit
// waits its turn, cancelled with the RPC's context; a longer delay is
// denied. Default: guard.DefaultMaxDelay.
func WithMaxDelay(d time.Duration) Option { return guard.WithMaxDelay(d) }

// WithRefundOn refunds an RPC whose end, as an HTTP status (see
// HTTPStatus), makes match report true: WithRefundOn(guard.ServerErrors)
// refunds RPCs that end with Unknown, Internal, Unavailable, ... .
// Default: none.
func WithRefundOn(match func(status int) bool) Option { return guard.WithRefundOn(match) }

// WithReportedCost lets the handler report its real cost with
// guard.ReportCost(ctx, n) or guard.AddCost(ctx, n), on the context it
// receives (a stream's Context()). Default: off.
func WithReportedCost() Option { return guard.WithReportedCost() }

// WithResponseCost settles each RPC at the cost fn computes from its
// end: guard.Result.Status is HTTPStatus of its code, Result.Bytes the
// encoded size of the response (the messages a stream sent), when it is a
// protocol buffer, else 0. Default: none.
func WithResponseCost(fn func(guard.Result) int64) Option { return guard.WithResponseCost(fn) }

// WithOnDenied calls fn for every denial, dry run included, before the
// denied handler; for metrics and logs. d is valid only during the call.
// Default: none.
func WithOnDenied(fn func(ctx context.Context, fullMethod string, d *guard.Denial)) Option {
	if fn == nil {
		return guard.Invalid("WithOnDenied", "nil function")
	}
	return guard.WithOnDenied(func(r keyfuncs.Request, d *guard.Denial) {
		ctx, m := rpcOf(r)
		fn(ctx, m, d)
	})
}

// WithOnError calls fn with every error, those answered by the error
// handler, those of dry run and failed settlements after the handler; for
// logs. Default: none.
func WithOnError(fn func(ctx context.Context, fullMethod string, err error)) Option {
	if fn == nil {
		return guard.Invalid("WithOnError", "nil function")
	}
	return guard.WithOnError(func(r keyfuncs.Request, err error) {
		ctx, m := rpcOf(r)
		fn(ctx, m, err)
	})
}

// WithAdaptive applies the adaptive concurrency limit lim (package
// adaptive) before the rules: an RPC it sheds ends with codes.Unavailable
// and a RetryInfo (see DeniedStatus), and is charged nothing by the
// rules. With it, the constructors accept a nil *core.Limiter: the
// adaptive limit alone. It is guard.WithAdaptive. Default: none.
func WithAdaptive(lim *adaptive.Limiter) Option { return guard.WithAdaptive(lim) }

// WithPriority chooses each RPC's priority for the adaptive limit, from
// its context and full method: adaptive.Sheddable RPCs are shed first.
// It is guard.WithPriority. Default: every RPC adaptive.Critical.
func WithPriority(fn func(ctx context.Context, fullMethod string) adaptive.Priority) Option {
	if fn == nil {
		return guard.Invalid("WithPriority", "nil function")
	}
	return guard.WithPriority(func(r keyfuncs.Request) adaptive.Priority { return fn(rpcOf(r)) })
}
