package faulty

import "time"

// DefaultMaxHold is the hold size when Config.MaxHold is 0.
const DefaultMaxHold = 256

// Config sets the faults. Probabilities are per packet, from 0 to 1.
type Config struct {
	// Seed seeds the generators: the same seed and sends give the same
	// faults. (Which packets are held is decided by the seed; when a held
	// packet goes can also depend on time: Delay, and MaxReorderWait when
	// traffic pauses.)
	Seed uint64

	Loss      float64 // drop the packet
	Duplicate float64 // send it twice
	Reorder   float64 // send it after the next 1 to 3 packets
	Corrupt   float64 // flip a bit of a received packet (see the package comment)
	Mangle    float64 // flip a bit of the BTH before the ICRC is sealed

	// Delay holds DelayRate of the packets for Delay before sending them.
	Delay     time.Duration
	DelayRate float64

	// MaxHold bounds the packets held for reordering and delay together.
	MaxHold int

	// MaxReorderWait bounds how long a reordered packet waits for later
	// packets to overtake it (default 1 ms): without it, a packet held at
	// the end of a burst would wait for traffic that the lost packet itself
	// holds up, which no real network does.
	MaxReorderWait time.Duration
}

func (c *Config) maxReorderWait() time.Duration {
	if c.MaxReorderWait > 0 {
		return c.MaxReorderWait
	}
	return time.Millisecond
}

// Stats counts the faults injected so far.
type Stats struct {
	Sent       uint64 // packets handed to Send
	Forwarded  uint64 // packets handed to the inner backend, copies included
	Lost       uint64
	Duplicated uint64
	Reordered  uint64 // packets (and copies) held for reordering
	Delayed    uint64 // packets (and copies) held for delay
	HoldFull   uint64 // reorders and delays not done because the hold was full
	Mangled    uint64
	Corrupted  uint64
	SendErrors uint64 // failed sends of held packets by Flush or the delay goroutine
}
