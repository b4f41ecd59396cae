package afpacket

import "github.com/goroce/goroce/rocev2/backend"

// Stats are the backend's own counts, beyond what it hands the device.
type Stats struct {
	// Unresolved counts packets dropped because their destination's MAC
	// could not be learnt (or too many waited for it).
	Unresolved uint64
	// BadBlocks counts receive ring blocks (ReceiveRing) skipped, wholly
	// or from the first record whose numbers lead outside the block.
	BadBlocks uint64
}

// api is every method Backend has, on every system: the Linux
// implementation and the stub elsewhere must both have them, so that a
// program that builds on Linux builds everywhere (and fails at run time
// with the stub's error instead).
type api interface {
	backend.Backend
	backend.NIC
	Interface() (name string, index int)
	Stats() Stats
}

var _ api = (*Backend)(nil)
