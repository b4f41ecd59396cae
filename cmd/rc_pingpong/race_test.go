//go:build race

package main

// raceEnabled: the test runs with the race detector.
const raceEnabled = true
