//go:build !race

package smcwire

const raceEnabled = false
