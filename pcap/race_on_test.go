//go:build race

package pcap_test

// raceEnabled: the race detector's instrumentation allocates, so the
// allocation tests only run without it.
const raceEnabled = true
