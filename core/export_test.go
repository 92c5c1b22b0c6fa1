package core

// DenyCacheLen returns the number of keys l's deny cache remembers.
func DenyCacheLen(l *Limiter) int { return l.deny.len() }
