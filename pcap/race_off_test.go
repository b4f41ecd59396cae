//go:build !race

package pcap_test

const raceEnabled = false
