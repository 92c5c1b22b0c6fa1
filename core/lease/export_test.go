package lease

// Wait waits for the background work of s: renewals and give-backs.
func Wait(s *Store) { s.track.wait() }
