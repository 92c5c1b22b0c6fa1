package grpclimit

import (
	"context"
	"errors"

	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// UnaryServerInterceptor returns a unary server interceptor that limits
// RPCs with lim: by the peer's IP address (keyfuncs.IP()), at cost 1,
// with draft-11 rate-limit metadata, unless options say otherwise:
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim)),
//		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim)),
//	)
//
// The rate-limit metadata (ratelimit-policy, ratelimit) is sent as header
// metadata with the response. A denied RPC ends with
// codes.ResourceExhausted, a google.rpc.RetryInfo detail and retry-after
// metadata (see DeniedStatus), without reaching the handler; an RPC that
// cannot be decided ends with the status of ErrorStatus. Otherwise the
// interceptor calls the handler with a context that carries the cost slot
// of WithReportedCost, and afterwards settles the RPC from the code it
// ended with (see HTTPStatus) and the encoded size of its response.
//
// Interceptors of this package chained on one server act as one decision
// (see guard.Chain): an RPC that one of them denies leaves no charge in
// the others, and a limiter state is charged once per RPC.
//
// UnaryServerInterceptor panics if lim is nil (unless WithAdaptive gives
// an adaptive limit, which then limits alone) or an option is invalid (a
// nil function, a negative cost or max delay, a nil limiter in WithRule,
// an unknown header style, a malformed method name in WithMethodCosts),
// with a message that names the option: programmer errors, caught at
// startup. The interceptor is safe for concurrent use.
func UnaryServerInterceptor(lim *core.Limiter, opts ...Option) grpc.UnaryServerInterceptor {
	g := newGuard("UnaryServerInterceptor", lim, opts)
	track := g.NeedsResult()
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, st, own := join(ctx)
		if own {
			st.ctx = ctx
		}
		w := &writer{st: st}
		var resp any
		var err error
		passed := false
		serr := g.Serve(&request{ctx: ctx, method: info.FullMethod}, w, func(ctx context.Context) guard.Result {
			passed = true
			resp, err = handler(ctx, req)
			if !track {
				return guard.Result{}
			}
			res := guard.Result{Status: HTTPStatus(codeOfError(err))}
			if err == nil {
				res.Bytes = size(resp)
			}
			return res
		})
		if own {
			st.flush()
		}
		if !passed {
			return nil, w.notAdmitted(serr)
		}
		return resp, err
	}
}

// StreamServerInterceptor returns a stream server interceptor that limits
// streaming RPCs with lim, as UnaryServerInterceptor limits unary ones.
//
// A stream is one decision, made when it starts, before the handler runs:
// its cost (WithCost, WithMethodCosts, ...) is charged once for the whole
// stream, however many messages it carries, and a unit of a Concurrency
// limit (core.InFlight) is held until the handler returns, so such a
// limit caps the streams open at once. The handler receives a
// grpc.ServerStream whose Context carries the cost slot of
// WithReportedCost, so that a stream may report what it really cost
// (messages sent, tokens streamed) with guard.ReportCost or guard.AddCost;
// WithResponseCost sees the encoded size of the messages it sent. The
// rate-limit metadata goes out with the stream's headers: before the
// first message the handler sends, or with its status.
//
// It panics on a nil lim or an invalid option, as UnaryServerInterceptor
// does. The interceptor is safe for concurrent use.
func StreamServerInterceptor(lim *core.Limiter, opts ...Option) grpc.StreamServerInterceptor {
	g := newGuard("StreamServerInterceptor", lim, opts)
	track := g.NeedsResult()
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, st, own := join(ss.Context())
		if own {
			st.ss = ss
		}
		w := &writer{st: st}
		var err error
		passed := false
		serr := g.Serve(&request{ctx: ctx, method: info.FullMethod}, w, func(ctx context.Context) guard.Result {
			passed = true
			ws := &serverStream{ServerStream: ss, ctx: ctx, st: st, track: track}
			err = handler(srv, ws)
			if !track {
				return guard.Result{}
			}
			return guard.Result{Status: HTTPStatus(codeOfError(err)), Bytes: ws.bytes}
		})
		if own {
			st.flush()
		}
		if !passed {
			return w.notAdmitted(serr)
		}
		return err
	}
}

// newGuard returns the Guard of an interceptor made by the function fn:
// the denied and error handlers of this package, then opts.
func newGuard(fn string, lim *core.Limiter, opts []Option) *guard.Guard {
	all := make([]guard.Option, 0, len(opts)+2)
	all = append(all, guard.WithDeniedHandler(deniedStatus), guard.WithErrorHandler(errorStatus))
	all = append(all, opts...)
	g, err := guard.New(lim, all...)
	if errors.Is(err, guard.ErrNilLimiter) {
		panic("grpclimit: " + fn + ": nil *core.Limiter (pass one, or WithAdaptive)")
	}
	if err != nil {
		panic("grpclimit: " + fn + ": " + err.Error())
	}
	return g
}

// deniedStatus is the default guard.DeniedHandler: DeniedStatus.
func deniedStatus(_ guard.Writer, _ keyfuncs.Request, d *guard.Denial) error {
	return DeniedStatus(d).Err()
}

// errorStatus is the default guard.ErrorHandler: ErrorStatus, or the
// RPC's own end when its context ended.
func errorStatus(_ guard.Writer, r keyfuncs.Request, err error) error {
	return defaultErrorStatus(r.Context(), err).Err()
}
