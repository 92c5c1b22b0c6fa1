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

func TestHeaderSlots(t *testing.T) {
	long := strings.Repeat("x", 200)
	tests := []struct {
		name string
		set  func(s *guard.HeaderSlots, h http.Header, buf []byte)
		want http.Header
	}{
		{"values set from a buffer stay as set when the buffer changes", func(s *guard.HeaderSlots, h http.Header, buf []byte) {
			s.SetBytes(h, "A", append(buf[:0], "one"...))
			s.SetBytes(h, "B", append(buf[:0], "two"...))
			copy(buf, "zzz")
		}, http.Header{"A": {"one"}, "B": {"two"}}},
		{"setting a header again replaces its value and keeps the others", func(s *guard.HeaderSlots, h http.Header, buf []byte) {
			s.Set(h, "A", "one")
			s.SetBytes(h, "B", append(buf[:0], "two"...))
			s.SetBytes(h, "A", append(buf[:0], "three"...))
		}, http.Header{"A": {"three"}, "B": {"two"}}},
		{"a value added to a header leaves the next header alone", func(s *guard.HeaderSlots, h http.Header, buf []byte) {
			s.Set(h, "A", "one")
			s.Set(h, "B", "two")
			h.Add("A", "more")
		}, http.Header{"A": {"one", "more"}, "B": {"two"}}},
		{"more headers than its storage holds are set all the same", func(s *guard.HeaderSlots, h http.Header, buf []byte) {
			for _, n := range []string{"A", "B", "C", "D", "E", "F"} {
				s.SetBytes(h, n, append(buf[:0], strings.ToLower(n)...))
			}
		}, http.Header{"A": {"a"}, "B": {"b"}, "C": {"c"}, "D": {"d"}, "E": {"e"}, "F": {"f"}}},
		{"a value longer than its buffer is set all the same", func(s *guard.HeaderSlots, h http.Header, buf []byte) {
			s.SetBytes(h, "A", append(buf[:0], "short"...))
			s.SetBytes(h, "B", append(buf[:0], long...))
			s.SetBytes(h, "C", append(buf[:0], "after"...))
		}, http.Header{"A": {"short"}, "B": {long}, "C": {"after"}}},
		{"an empty value is set", func(s *guard.HeaderSlots, h http.Header, buf []byte) {
			s.SetBytes(h, "A", nil)
		}, http.Header{"A": {""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s guard.HeaderSlots
			h := http.Header{}
			tt.set(&s, h, make([]byte, 0, 256))
			if !maps.EqualFunc(h, tt.want, func(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") }) {
				t.Errorf("header = %v, want %v", h, tt.want)
			}
		})
	}
}

// slotWriter is a guard.BytesWriter over an http.Header, with HeaderSlots.
type slotWriter struct {
	recorder
	slots guard.HeaderSlots
}

func (w *slotWriter) SetHeader(name, value string) { w.slots.Set(w.header, name, value) }
func (w *slotWriter) SetHeaderBytes(name string, value []byte) {
	w.slots.SetBytes(w.header, name, value)
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
				got := &slotWriter{recorder: *newRecorder()}
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
