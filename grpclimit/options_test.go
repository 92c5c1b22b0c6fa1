package grpclimit_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/grpclimit"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/guard/guardtest"
	"github.com/tollgate/tollgate/keyfuncs"
)

// TestBadConfigurationPanicsAtConstruction checks that both constructors
// refuse what they cannot use, naming it, before any RPC.
func TestBadConfigurationPanicsAtConstruction(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(1, "per-minute"))
	for _, c := range []struct {
		name string
		lim  *core.Limiter
		opt  grpclimit.Option
		want string // in the panic's message
	}{
		{"a nil limiter", nil, nil, "nil *core.Limiter"},
		{"a nil key function", lim, grpclimit.WithKeyFunc(nil), "WithKeyFunc"},
		{"a nil keyfuncs.Func", lim, grpclimit.WithKey(nil), "WithKey"},
		{"a nil cost function", lim, grpclimit.WithCostFunc(nil), "WithCostFunc"},
		{"a negative cost", lim, grpclimit.WithCost(-1), "WithCost"},
		{"a nil skip function", lim, grpclimit.WithSkip(nil), "WithSkip"},
		{"a nil denied handler", lim, grpclimit.WithDeniedHandler(nil), "WithDeniedHandler"},
		{"a nil error handler", lim, grpclimit.WithErrorHandler(nil), "WithErrorHandler"},
		{"a nil OnDenied hook", lim, grpclimit.WithOnDenied(nil), "WithOnDenied"},
		{"a nil OnError hook", lim, grpclimit.WithOnError(nil), "WithOnError"},
		{"a nil rule limiter", lim, grpclimit.WithRule(nil, keyfuncs.IP()), "WithRule"},
		{"a nil refund matcher", lim, grpclimit.WithRefundOn(nil), "WithRefundOn"},
		{"a nil response cost", lim, grpclimit.WithResponseCost(nil), "WithResponseCost"},
		{"a negative max delay", lim, grpclimit.WithMaxDelay(-1), "WithMaxDelay"},
		{"an unknown header style", lim, grpclimit.WithHeaders(guard.HeaderStyle(99)), "WithHeaders"},
		{"a negative method cost", lim, grpclimit.WithMethodCosts(map[string]int64{unaryMethod: -1}, 1), "WithMethodCosts"},
		{"a negative cost for other methods", lim, grpclimit.WithMethodCosts(nil, -1), "WithMethodCosts"},
		{"a method name without its service", lim, grpclimit.WithMethodCosts(map[string]int64{"UnaryCall": 2}, 1), `"UnaryCall" is not a full method name`},
		{"a method name without a leading slash", lim, grpclimit.WithMethodCosts(map[string]int64{"grpc.testing.TestService/UnaryCall": 2}, 1), "WithMethodCosts"},
		{"a method name of three parts", lim, grpclimit.WithMethodCosts(map[string]int64{"/a/b/c": 2}, 1), "WithMethodCosts"},
		{"a service without a method", lim, grpclimit.WithMethodCosts(map[string]int64{"/grpc.testing.TestService/": 2}, 1), "WithMethodCosts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for fn, build := range map[string]func(){
				"UnaryServerInterceptor":  func() { grpclimit.UnaryServerInterceptor(c.lim, c.opt) },
				"StreamServerInterceptor": func() { grpclimit.StreamServerInterceptor(c.lim, c.opt) },
			} {
				msg := panicOf(build)
				if !strings.HasPrefix(msg, "grpclimit: "+fn+": ") || !strings.Contains(msg, c.want) {
					t.Errorf("%s panics with %q, want a message from it that says %q", fn, msg, c.want)
				}
			}
		})
	}
}

// panicOf returns the message fn panics with, or "" if it does not.
func panicOf(fn func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	fn()
	return ""
}

func TestAValidMethodCostsMapIsAccepted(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(1, "per-minute"))
	if msg := panicOf(func() {
		grpclimit.UnaryServerInterceptor(lim, grpclimit.WithMethodCosts(map[string]int64{unaryMethod: 0, "/pkg.v1.Svc/Method": 7}, 0))
	}); msg != "" {
		t.Errorf("panics with %q", msg)
	}
}

// TestHandlersReplaceTheStatus checks the denied and error handlers: the
// status they return ends the RPC, nil leaves the default, and handlers
// written for package guard, which write HTTP statuses, end it with the
// matching code.
func TestHandlersReplaceTheStatus(t *testing.T) {
	custom := status.Error(codes.Unavailable, "come back later")
	for _, c := range []struct {
		name string
		opt  grpclimit.Option
		deny bool // the second RPC is denied, else the RPC fails for a missing key
		code codes.Code
		msg  string
	}{
		{"a denied handler's status ends the RPC", grpclimit.WithDeniedHandler(func(context.Context, string, *guard.Denial) error { return custom }),
			true, codes.Unavailable, "come back later"},
		{"a denied handler that returns nil leaves the default", grpclimit.WithDeniedHandler(func(context.Context, string, *guard.Denial) error { return nil }),
			true, codes.ResourceExhausted, "rate limit exceeded: retry after 60 seconds"},
		{"guard's default denied handler ends it with ResourceExhausted", guard.WithDeniedHandler(guard.DefaultDeniedHandler),
			true, codes.ResourceExhausted, "too many requests"},
		{"an error handler's status ends the RPC", grpclimit.WithErrorHandler(func(context.Context, string, error) error { return custom }),
			false, codes.Unavailable, "come back later"},
		{"an error handler that returns nil leaves the default", grpclimit.WithErrorHandler(func(context.Context, string, error) error { return nil }),
			false, codes.InvalidArgument, "missing header X-Api-Key"},
		{"guard's default error handler ends it with the code of its status", guard.WithErrorHandler(guard.DefaultErrorHandler),
			false, codes.InvalidArgument, "bad request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := guardtest.NewLimiter(t, nil, perMinute(1, "per-minute"))
			cl := serve(t, client, &service{}, grpc.ChainUnaryInterceptor(
				grpclimit.UnaryServerInterceptor(lim, grpclimit.WithKey(keyfuncs.Header("X-Api-Key")), c.opt)))
			var r reply
			if c.deny {
				callUnary(t, cl, 0, "x-api-key", "k")
				r = callUnary(t, cl, 0, "x-api-key", "k")
				checkOnce(t, r, "retry-after", "60")
			} else {
				r = callUnary(t, cl, 0)
			}
			st := status.Convert(r.err)
			if st.Code() != c.code || st.Message() != c.msg {
				t.Errorf("status %v %q, want %v %q", st.Code(), st.Message(), c.code, c.msg)
			}
		})
	}
}

func TestFullMethodReachesTheRPCFromGuardFunctions(t *testing.T) {
	lim := guardtest.NewLimiter(t, nil, perMinute(1, "per-minute"))
	var seen string
	c := unaryServer(t, &service{}, grpclimit.UnaryServerInterceptor(lim, guard.WithOnDenied(func(r keyfuncs.Request, _ *guard.Denial) {
		seen, _ = grpclimit.FullMethod(r)
	})))
	callUnary(t, c, 0)
	callUnary(t, c, 0)
	if seen != unaryMethod {
		t.Errorf("FullMethod = %q, want %q", seen, unaryMethod)
	}
	if m, ok := grpclimit.FullMethod(keyfuncs.FromHTTP(httptest.NewRequest("GET", "/", nil))); ok || m != "" {
		t.Errorf("FullMethod of an HTTP request = %q, %v; want \"\", false", m, ok)
	}
}
