package redisstore

import (
	"testing"
	"time"
)

// A timer that fired while its call was answered goes back to the pool
// empty (stopTimer quiets it), also under GODEBUG asynctimerchan=1, where
// a fired timer keeps its value in its channel past Stop: the next wait
// would otherwise end at once.
func TestAFiredTimerGoesBackEmpty(t *testing.T) {
	t.Setenv("GODEBUG", "asynctimerchan=1")
	tm := time.NewTimer(time.Hour) // made under the setting
	tm.Reset(time.Nanosecond)
	time.Sleep(20 * time.Millisecond) // it fires; nobody reads it
	quiet(tm)
	select {
	case <-tm.C:
		t.Fatal("the timer kept the value it fired with")
	default:
	}
	tm.Reset(time.Hour)
	select {
	case <-tm.C:
		t.Fatal("a wait with this timer would end at once")
	case <-time.After(20 * time.Millisecond):
	}
}
