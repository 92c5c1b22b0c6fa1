// Package grpclimit is Tollgate's rate limiting for gRPC servers
// (google.golang.org/grpc): a unary and a stream server interceptor over
// the request flow of package guard, the one every Tollgate adapter runs.
//
//	lim, err := core.New(memstore.New(), core.PerSecond(10), core.PerMinute(100))
//	...
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim)),   // per peer IP
//		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim)),
//	)
//
// # Denials and errors
//
// A denied RPC does not reach its handler. It ends with
// codes.ResourceExhausted and two details: google.rpc.RetryInfo, whose
// retry_delay is the time until the denied cost could pass (the
// Retry-After of the HTTP adapters, whole seconds), and
// google.rpc.QuotaFailure, naming the violated policies. A cost above a
// limit's capacity can never pass: ResourceExhausted without RetryInfo.
// An RPC that cannot be decided ends with a generic message that never
// holds an error's text (see ErrorStatus): codes.InvalidArgument naming
// what a key function missed ("missing header X-Api-Key"),
// codes.Unavailable for a failing store under core.FailClosed (under
// core.FailOpen the RPC passes). Log errors with WithOnError.
//
// # Metadata
//
// The rate-limit header fields of the HTTP adapters travel as response
// header metadata, lower case, on every RPC, denied or not:
//
//	ratelimit-policy: "10-per-1s";q=10;w=1, "100-per-1m";q=100;w=60
//	ratelimit: "10-per-1s";r=9;t=1
//	retry-after: 1                  (denied RPCs)
//
// They go out with the response's headers: for a unary RPC with its
// response or status, for a stream before its first message (or with its
// status). A handler that sends its headers itself with grpc.SendHeader on
// its context, which the interceptors cannot see, makes them go as
// trailer metadata instead.
//
// # Keys
//
// The default key is keyfuncs.IP() over the peer's address (grpc/peer):
// the transport peer alone. Behind a proxy that forwards gRPC, trust its
// addresses, and the forwarding metadata it sets (x-forwarded-for,
// forwarded, or a key you name) is read, right to left, skipping trusted
// hops, and only when the peer is a trusted proxy: the rules of HTTP,
// since package keyfuncs reads metadata as it reads headers.
//
//	grpclimit.WithKey(keyfuncs.IP(keyfuncs.TrustProxies(netip.MustParsePrefix("10.0.0.0/8"))))
//
// A peer that is not an IP address (a Unix socket, an in-memory bufconn
// listener) fails every RPC under that key with codes.Internal: key such
// servers on something else, or, behind a proxy on a Unix socket, trust it
// with keyfuncs.TrustUnixSocket, and its forwarding metadata names the
// client. Other keys: keyfuncs.Header("x-api-key") for
// a metadata value, keyfuncs.Route() for the full method
// ("/package.Service/Method"), keyfuncs.Join, or a function over the
// RPC's context and full method with WithKeyFunc (a user an auth
// interceptor stored in the context). keyfuncs.Method is "POST" for every
// RPC.
//
// # Costs
//
// An RPC costs 1 unless WithCost, WithMethodCosts (a cost per full
// method) or WithCostFunc say otherwise. A stream is one decision, at its
// start: its cost is charged once, and a unit of a Concurrency limit
// (core.InFlight) is held until its handler returns, panics included. A
// handler that learns its real cost as it runs reports it with
// guard.ReportCost or guard.AddCost on its context (a stream's
// Context()), under WithReportedCost. After the handler, the RPC is
// settled from the code it ended with, as an HTTP status (HTTPStatus):
// WithRefundOn(guard.ServerErrors) refunds RPCs that end with Unknown,
// Internal, Unavailable and the other server-side codes. A handler that
// panics is settled as a server error (500), its units in flight
// released, and the panic goes on to a recovery interceptor around this
// one (without one, grpc-go lets it crash the process).
//
// # Chained interceptors
//
// Interceptors of this package chained on one server act as one decision,
// as stacked HTTP middlewares do (see guard.Chain): an RPC that one of
// them denies leaves no charge in the others, a limiter state is charged
// once per RPC, and the metadata of each describes the whole chain. They
// may have other interceptors between them (an authentication interceptor
// before a per-user limit, say).
//
// # Options
//
// Option is guard.Option: every option of package guard works here, and
// the options of this package are the same ones, or their translations to
// the RPC's context and full method name. FullMethod returns the full
// method of the keyfuncs.Request that functions written against package
// guard receive; its Context is the RPC's.
package grpclimit
