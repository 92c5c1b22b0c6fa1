package guard

import (
	"testing"
	"unsafe"
)

// A Chain that keeps its state serves each request with it, emptied,
// and gives it to no pool; one that does not keep takes one each time. A
// Chain stays one pointer: adapters that allocate one per request pay
// for no more.
func TestAKeptStateServesTheNextRequest(t *testing.T) {
	if size := unsafe.Sizeof(Chain{}); size != unsafe.Sizeof(uintptr(0)) {
		t.Errorf("a Chain is %d bytes, want one pointer", size)
	}
	var c Chain
	c.Keep()
	s, own := c.acquire()
	if !own {
		t.Fatal("the first acquire of a Chain does not own its state")
	}
	if inner, own := c.acquire(); inner != s || own {
		t.Errorf("a middleware inside got %p (own %v), want the request's %p, not owned", inner, own, s)
	}
	s.entries, s.stopped, s.lent = s.one[:1], true, true
	s.admitted = append(s.admitted, nil)
	c.release()
	if c.s != s || s.busy {
		t.Fatalf("after its request the Chain holds %p (busy %v), want %p kept, idle", c.s, c.s != nil && c.s.busy, s)
	}
	// The kept state went to no pool: another Chain cannot take it while
	// this one keeps it (it would take it here, had it been put back).
	var other Chain
	if os, _ := other.acquire(); os == s {
		t.Fatal("another Chain took the kept state from the pool")
	}
	other.release()
	if other.s != nil {
		t.Errorf("a Chain that does not Keep holds %p after its request", other.s)
	}
	s2, own := c.acquire()
	if s2 != s || !own {
		t.Fatalf("the next request's state is %p (own %v), want the kept %p, owned", s2, own, s)
	}
	if s2.entries != nil || s2.stopped || s2.lent || len(s2.admitted) != 0 {
		t.Errorf("the kept state was not emptied: %d entries, stopped %v, lent %v, %d admitted", len(s2.entries), s2.stopped, s2.lent, len(s2.admitted))
	}
	c.release()
}
