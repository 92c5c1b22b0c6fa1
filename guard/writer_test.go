package guard_test

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/guard"
	"github.com/tollgate/tollgate/keyfuncs"
)

// bytesWriter is a guard.BytesWriter over an http.Header: it copies each
// value it takes as bytes, as its contract requires.
type bytesWriter struct{ recorder }

func (w *bytesWriter) SetHeaderBytes(name string, value []byte) {
	w.header[name] = []string{string(value)}
}

// TestBytesWritersGetTheSameHeaders sends requests that pass and requests
// that are denied, in every header style, through a Writer, a BytesWriter
// and a HeaderWriter, and compares their responses.
func TestBytesWritersGetTheSameHeaders(t *testing.T) {
	limits := []core.Limit{fixed(2, time.Minute, "per-minute"), fixed(1000, time.Hour, "per-hour")}
	for _, style := range []guard.HeaderStyle{guard.HeadersDraft11, guard.HeadersDraft06, guard.HeadersLegacy, guard.HeadersNone} {
		t.Run(styleName(style)+" headers are the same through a BytesWriter and a HeaderWriter", func(t *testing.T) {
			e := newEnv(t)
			plain := mustNew(t, e.limiter(t, limits...), guard.WithHeaders(style))
			viaBytes := mustNew(t, e.limiter(t, limits...), guard.WithHeaders(style))
			viaMap := mustNew(t, e.limiter(t, limits...), guard.WithHeaders(style))
			var sent []http.Header // what a HeaderWriter got, and what it should still hold
			var wants []http.Header
			for i := range 3 { // two pass, the third is denied
				r := keyfuncs.FromHTTP(request("192.0.2.1:1"))
				want := newRecorder()
				_ = plain.Serve(r, want, func(context.Context) guard.Result { return guard.Result{} })
				r = keyfuncs.FromHTTP(request("192.0.2.2:1"))
				got := &bytesWriter{recorder: *newRecorder()}
				_ = viaBytes.Serve(r, got, func(context.Context) guard.Result { return guard.Result{} })
				if !sameHeader(got.header, want.header) || got.status != want.status || got.body != want.body {
					t.Errorf("request %d: BytesWriter got %d %v %s, Writer got %d %v %s", i, got.status, got.header, got.body, want.status, want.header, want.body)
				}
				r = keyfuncs.FromHTTP(request("192.0.2.3:1"))
				hw := &mapWriter{recorder: *newRecorder()}
				_ = viaMap.Serve(r, hw, func(context.Context) guard.Result { return guard.Result{} })
				if !sameHeader(hw.header, want.header) || hw.status != want.status || hw.body != want.body {
					t.Errorf("request %d: HeaderWriter got %d %v %s, Writer got %d %v %s", i, hw.status, hw.header, hw.body, want.status, want.header, want.body)
				}
				sent, wants = append(sent, hw.header), append(wants, want.header)
			}
			// The values a HeaderWriter got are its own: later responses,
			// built in the same buffer, leave them as they were.
			for i := range sent {
				if !sameHeader(sent[i], wants[i]) {
					t.Errorf("request %d: HeaderWriter's headers became %v after later requests, want %v", i, sent[i], wants[i])
				}
			}
		})
	}
}

// mapWriter is a guard.HeaderWriter over an http.Header.
type mapWriter struct{ recorder }

func (w *mapWriter) ResponseHeader() http.Header { return w.header }

// nilMapWriter is a guard.HeaderWriter whose ResponseHeader is nil.
type nilMapWriter struct{ recorder }

func (w *nilMapWriter) ResponseHeader() http.Header { return nil }

// TestAHeaderWriterWithoutAMapGetsItsHeadersAsAWriter: a HeaderWriter
// whose map is nil is written to through SetHeader, as a plain Writer, and
// gets the same headers, on requests that pass and on a denial.
func TestAHeaderWriterWithoutAMapGetsItsHeadersAsAWriter(t *testing.T) {
	e := newEnv(t)
	plain := mustNew(t, e.limiter(t, fixed(1, time.Minute, "per-minute")))
	noMap := mustNew(t, e.limiter(t, fixed(1, time.Minute, "per-minute")))
	for i := range 2 { // the second is denied
		want := newRecorder()
		_ = plain.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), want, func(context.Context) guard.Result { return guard.Result{} })
		got := &nilMapWriter{recorder: *newRecorder()}
		_ = noMap.Serve(keyfuncs.FromHTTP(request("192.0.2.2:1")), got, func(context.Context) guard.Result { return guard.Result{} })
		if !sameHeader(got.header, want.header) || got.status != want.status || len(got.header) == 0 {
			t.Errorf("request %d: got %d %v, want %d %v", i, got.status, got.header, want.status, want.header)
		}
	}
}

func sameHeader(a, b http.Header) bool {
	return maps.EqualFunc(a, b, func(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") })
}

// TestAHandlerAddingToTheSharedPolicyLeavesOtherResponsesAlone checks
// the sharing of RateLimit-Policy between the responses of a HeaderWriter:
// what a handler adds with http.Header's methods stays in its response.
func TestAHandlerAddingToTheSharedPolicyLeavesOtherResponsesAlone(t *testing.T) {
	e := newEnv(t)
	g := mustNew(t, e.limiter(t, fixed(10, time.Minute, "per-minute")))
	var hs []http.Header
	for range 2 {
		w := &mapWriter{recorder: *newRecorder()}
		_ = g.Serve(keyfuncs.FromHTTP(request("192.0.2.1:1")), w, func(context.Context) guard.Result {
			w.header.Add(guard.HeaderRateLimitPolicy, `"mine";q=1;w=1`)
			return guard.Result{}
		})
		hs = append(hs, w.header)
	}
	want := []string{`"per-minute";q=10;w=60`, `"mine";q=1;w=1`}
	for i, h := range hs {
		if got := h.Values(guard.HeaderRateLimitPolicy); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("response %d: RateLimit-Policy = %q, want %q", i, got, want)
		}
	}
}

func styleName(s guard.HeaderStyle) string {
	return map[guard.HeaderStyle]string{guard.HeadersDraft11: "draft-11", guard.HeadersDraft06: "draft-06", guard.HeadersLegacy: "legacy", guard.HeadersNone: "no"}[s]
}
