package faulty

import "math/rand/v2"

// Stream selectors, so that the send and receive generators of one seed are
// independent.
const (
	txStream = 0x9e3779b97f4a7c15
	rxStream = 0xbf58476d1ce4e5b9
)

// faults is what happens to one sent packet.
type faults struct {
	lose, mangle, duplicate, delay, reorder bool
	mangleBit                               uint64
	after                                   int // reorder: later packets to wait for
}

// decide draws the faults of the next sent packet: always seven values, in
// this order, whatever is enabled.
func decide(r *rand.Rand, c *Config) faults {
	var f faults
	f.lose = r.Float64() < c.Loss
	f.mangle = r.Float64() < c.Mangle
	f.mangleBit = r.Uint64()
	f.duplicate = r.Float64() < c.Duplicate
	f.delay = r.Float64() < c.DelayRate && c.Delay > 0
	f.reorder = r.Float64() < c.Reorder
	f.after = 1 + int(r.Uint64()%3)
	return f
}

// corruption draws the fate of the next received packet: two values.
func corruption(r *rand.Rand, c *Config) (corrupt bool, bit uint64) {
	corrupt = r.Float64() < c.Corrupt
	return corrupt, r.Uint64()
}
