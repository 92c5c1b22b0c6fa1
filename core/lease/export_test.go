package lease

// Wait waits for the background work of s: renewals and give-backs.
func Wait(s *Store) { s.track.wait() }

// Tick ends, at now (Unix µs), the lots whose lease ended, as their timers
// do in real time, and waits for the give-backs.
func Tick(s *Store, now int64) {
	s.expireAll(now)
	s.track.wait()
}
