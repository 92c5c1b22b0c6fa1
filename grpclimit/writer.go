package grpclimit

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/internal/compare"
)

// rpcKey is the context key of an RPC's rpc.
type rpcKey struct{}

// rpc is what one RPC carries across the Tollgate interceptors it crosses:
// the guard.Chain that makes them one decision, and the rate-limit
// metadata they set, sent once. The outermost interceptor creates it and
// passes it on in the context; the ones further in find it there.
//
// gRPC's SetHeader adds to the header metadata and cannot replace a value,
// so each interceptor sets its metadata here, each value replacing the one
// an interceptor around it set (its own describes the whole chain, see
// guard.Chain), and it is handed to gRPC once, at the last moment before
// gRPC sends the headers: when the handler first sends a message or its
// headers on the stream, or, when it sent nothing, once the outermost
// interceptor returns (a unary RPC's response and a status go out only
// then).
type rpc struct {
	chain guard.Chain
	// tx is the RPC's transport stream, by which an interceptor further in
	// tells that the rpc in its context is its own RPC's.
	tx grpc.ServerTransportStream

	mu   sync.Mutex
	md   metadata.MD // the rate-limit metadata, lower-case keys
	sent bool        // md was handed to gRPC

	ctx context.Context   // a unary RPC's context, where grpc.SetHeader finds the stream
	ss  grpc.ServerStream // a streaming RPC's stream, as the outermost interceptor received it
}

// join returns the rpc of the RPC whose context is ctx: the one an
// interceptor around this one put there (own false), or a new one (own
// true), then in the returned context.
func join(ctx context.Context) (_ context.Context, st *rpc, own bool) {
	tx := grpc.ServerTransportStreamFromContext(ctx)
	if st, ok := ctx.Value(rpcKey{}).(*rpc); ok && sameStream(st.tx, tx) {
		return ctx, st, false
	}
	st = &rpc{tx: tx}
	return context.WithValue(ctx, rpcKey{}, st), st, true
}

// sameStream reports whether a and b are the same transport stream. A
// stream that cannot be compared (a test's fake of an uncomparable type,
// or of a comparable struct type whose interface field holds one) is
// never the same as another, rather than panic.
func sameStream(a, b grpc.ServerTransportStream) bool { return compare.Equal(a, b) }

// set sets the metadata key to value, unless the metadata was sent.
func (st *rpc) set(key, value string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.sent {
		return
	}
	if st.md == nil {
		st.md = make(metadata.MD, 3)
	}
	st.md[key] = []string{value}
}

// flush hands the metadata to gRPC as header metadata, once. When the
// handler already sent the headers itself in a way the interceptors do not
// see (grpc.SendHeader on its context), gRPC refuses them: they go in the
// trailers instead, which a client reads at the end of the call.
func (st *rpc) flush() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.sent {
		return
	}
	st.sent = true
	if len(st.md) == 0 {
		return
	}
	if st.ss != nil {
		if st.ss.SetHeader(st.md) != nil {
			st.ss.SetTrailer(st.md)
		}
		return
	}
	if grpc.SetHeader(st.ctx, st.md) != nil {
		_ = grpc.SetTrailer(st.ctx, st.md)
	}
}

// writer is the guard.ChainWriter of one interceptor's call.
type writer struct {
	st *rpc
	// err is the status of a response written with WriteResponse, by a
	// guard.DeniedHandler or guard.ErrorHandler that writes HTTP statuses.
	err error
}

var _ guard.ChainWriter = (*writer)(nil)

// Chain implements guard.ChainWriter with the RPC's chain.
func (w *writer) Chain() *guard.Chain { return &w.st.chain }

// SetHeader implements guard.Writer: it sets the metadata key of the
// header name, lower case. Content-Type is gRPC's own: it is left out.
func (w *writer) SetHeader(name, value string) {
	var key string
	switch name {
	case guard.HeaderRateLimitPolicy:
		key = "ratelimit-policy"
	case guard.HeaderRateLimit:
		key = "ratelimit"
	case guard.HeaderRetryAfter:
		key = "retry-after"
	case guard.HeaderContentType:
		return
	default:
		key = strings.ToLower(name)
	}
	w.st.set(key, value)
}

// WriteResponse implements guard.Writer for handlers written against
// package guard: the RPC ends with the code of the HTTP status (see
// HTTPStatus) and the status text as its message; the body is dropped.
func (w *writer) WriteResponse(code int, _ []byte) error {
	w.err = status.Error(codeOf(code), strings.ToLower(http.StatusText(code)))
	return nil
}

// notAdmitted returns the error an RPC that the Guard did not let through
// ends with: the handler's error, or the status written through w.
func (w *writer) notAdmitted(err error) error {
	switch {
	case err != nil:
		return err
	case w.err != nil:
		return w.err
	}
	return status.Error(codes.Unknown, "rate limiter: call not admitted")
}

// serverStream is the grpc.ServerStream a stream handler receives: its
// Context is the one the Guard passed on (with the cost slot of
// WithReportedCost), and it hands the rate-limit metadata to gRPC before
// the first message or header goes out.
type serverStream struct {
	grpc.ServerStream
	ctx   context.Context
	st    *rpc
	track bool  // count the bytes sent, for guard.Result
	bytes int64 // the encoded size of the messages sent
}

// Context returns the stream's context, as the Guard passed it on.
func (s *serverStream) Context() context.Context { return s.ctx }

// SendHeader sends the rate-limit metadata with md.
func (s *serverStream) SendHeader(md metadata.MD) error {
	s.st.flush()
	return s.ServerStream.SendHeader(md)
}

// SendMsg sends the rate-limit metadata with the first message's headers.
func (s *serverStream) SendMsg(m any) error {
	s.st.flush()
	err := s.ServerStream.SendMsg(m)
	if err == nil && s.track {
		s.bytes += size(m)
	}
	return err
}

// size returns the encoded size of m when it is a protocol buffer, else 0.
func size(m any) int64 {
	if pm, ok := m.(proto.Message); ok {
		return int64(proto.Size(pm))
	}
	return 0
}
