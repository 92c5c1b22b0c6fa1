package core

// DenyCacheLen returns the number of keys l's deny cache remembers.
func DenyCacheLen(l *Limiter) int { return l.deny.len() }

// Direct reports whether l's AllowN goes straight to its store.
func Direct(l *Limiter) bool { return l.direct }

// TakesInBrief reports whether l decides through its store's TakeBrief.
func TakesInBrief(l *Limiter) bool { return l.taker != nil }
