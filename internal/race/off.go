//go:build !race

// Package race tells tests whether the race detector is on: its
// instrumentation allocates and slows everything, so allocation tests skip
// under it (make test runs them again without it) and timing-sized loops
// shrink.
package race

// Enabled reports whether the binary was built with the race detector.
const Enabled = false
