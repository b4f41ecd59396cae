//go:build race

package smcwire

// raceEnabled: the race detector's instrumentation allocates, so the
// allocation tests only run without it.
const raceEnabled = true
