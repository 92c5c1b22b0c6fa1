package core

import "time"

// A Clock tells the time. Tests pass a fake one that they move by hand.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to a Clock.
type ClockFunc func() time.Time

// Now returns f().
func (f ClockFunc) Now() time.Time { return f() }

// SystemClock returns the clock of time.Now.
func SystemClock() Clock { return ClockFunc(time.Now) }
