//go:build !race

package main

// raceEnabled: the test runs without the race detector.
const raceEnabled = false
