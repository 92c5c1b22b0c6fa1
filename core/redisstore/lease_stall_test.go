package redisstore

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/core"
	"github.com/tollgate/tollgate/core/lease"
)

// A Refund through a lease store waits for its key's reservation ahead in
// flight (so that its answer, not the reservation's, is what later
// decisions report). With that reservation stuck in a SIGSTOPped
// redis-server, the Refund still returns by the Limiter's timeout, as a
// refund without leases would, and once the server resumes, the key's
// numbers are exact: the admissions, and none of the refund that failed.
func TestALeasedRefundDuringAStalledRenewal(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(clientOptions(srv.addr))
	defer c.Close()
	const quota = 1_000_000
	ls, lim := leasedFixedWindow(t, c, quota, lease.WithTimeout(time.Second))
	ctx := context.Background()
	admitted := int64(0)
	allow := func() {
		t.Helper()
		d, err := lim.Allow(ctx, "k")
		if err != nil || !d.Allowed {
			t.Fatalf("Allow = %+v, %v", d, err)
		}
		admitted++
	}
	for range 500 { // a steady demand: the instance holds a slice
		allow()
		time.Sleep(50 * time.Microsecond)
	}
	// Stop the server, and decide in process until a renewal is sent
	// (and stuck).
	r0 := ls.Stats().Reservations
	srv.signal(syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			srv.signal(syscall.SIGCONT)
		}
	}()
	for ls.Stats().Reservations == r0 {
		d, err := lim.Allow(ctx, "k")
		if err != nil {
			break // the slice is spent, and its renewal (or the Take's own reservation) stuck
		}
		if !d.Allowed {
			t.Fatalf("Allow = %+v", d)
		}
		admitted++
		time.Sleep(10 * time.Microsecond) // the renewal's goroutine runs
	}
	start := time.Now()
	_, refundErr := lim.Refund(ctx, "k", 1)
	took := time.Since(start)
	if refundErr == nil {
		t.Fatal("a Refund succeeded with the server stopped")
	}
	// The Limiter's timeout (100ms) bounds it; a loaded machine adds some.
	if took > core.DefaultTimeout+400*time.Millisecond {
		t.Errorf("the Refund took %v with the server stopped, want about the Limiter's timeout %v", took, core.DefaultTimeout)
	}
	srv.signal(syscall.SIGCONT)
	stopped = false
	// Once the server runs, the stuck reservation completes (or is undone,
	// its caller having given up): the key's numbers, shared state and
	// units held, count exactly the admissions.
	want := quota - admitted
	var got int64
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := lim.Peek(ctx, "k")
		if err == nil {
			got = d.Remaining
		}
		if got == want || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("Peek after the resume: %d remaining, want %d, after %v; stats %+v", got, want, time.Since(start), ls.Stats())
	if got != want {
		t.Errorf("Peek after the resume: remaining %d, want %d (%d admitted, the refund failed)", got, want, admitted)
	}
	allow() // and decisions go on
	t.Logf("the Refund returned %q after %v; %d admitted", refundErr, took, admitted)
}

// On a real Redis, a lease that ends by MaxLease long before its fixed
// window does gives its unspent units back, with the reservation's
// receipt, to the window they were charged in: the key shows exactly its
// admissions, nothing stranded for the rest of the window.
func TestALeaseEndedBeforeItsWindowGivesItsUnitsBack(t *testing.T) {
	c := newClient(t)
	const quota = 1_000_000
	ls, lim := leasedFixedWindow(t, c, quota, lease.WithMaxLease(300*time.Millisecond))
	ctx := context.Background()
	var admitted int64
	for range 500 {
		if d, err := lim.Allow(ctx, "k"); err == nil && d.Allowed {
			admitted++
		}
		time.Sleep(50 * time.Microsecond)
	}
	time.Sleep(600 * time.Millisecond) // every lease ends, the window goes on
	s := ls.Stats()
	d, err := lim.Peek(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if s.Returned == 0 || s.Expired != 0 || d.Remaining != quota-admitted {
		t.Errorf("after the leases ended: stats %+v, %d remaining; want the unspent units returned and %d remaining", s, d.Remaining, quota-admitted)
	}
	t.Logf("%d admitted, %d decided in process; %d units given back in %d give-backs", admitted, s.Local, s.Returned, s.GiveBacks)
}

// leasedFixedWindow returns a lease store with opts over a store of c,
// closed at the end of t, and a Limiter of quota an hour, a fixed
// window, through it. The tests compare a key's numbers across seconds:
// a window that ends in between starts the key afresh (a CI run failed
// so with windows of a minute), so it waits out the last 30 s of an
// hour, by the server's clock, before it starts.
func leasedFixedWindow(t *testing.T, c *redis.Client, quota int64, opts ...lease.Option) (*lease.Store, *core.Limiter) {
	t.Helper()
	clearOfWindowEnd(t, c, time.Hour, 30*time.Second)
	rs := newStore(t, c)
	ls, err := lease.New(rs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ls.Close() })
	lim, err := core.New(ls, core.PerHour(quota).WithAlgorithm(core.FixedWindow))
	if err != nil {
		t.Fatal(err)
	}
	return ls, lim
}
