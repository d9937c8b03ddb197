package core

import "time"

// Clock tells the time. Everything Cairn decides by time (due times,
// deadlines, fences, journal timestamps) reads it from a Clock, and the Lua
// scripts are handed "now" by their caller, so tests can control time and
// no script depends on the Redis server's clock.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the wall clock; the default of every Config.
var SystemClock Clock = systemClock{}
