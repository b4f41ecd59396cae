package shm

import "sync/atomic"

// Stats counts what a backend did, since Open.
type Stats struct {
	// Pairings is the pairings set up; Paired those alive now.
	Pairings, Paired uint64
	// SentPackets and SentBytes went into rings; ReceivedPackets and
	// ReceivedBytes came out of them.
	SentPackets, SentBytes         uint64
	ReceivedPackets, ReceivedBytes uint64
	// Doorbells is the wake-ups sent to peers: a system call each, made
	// only when the peer had said it would sleep (its receiver, or its
	// sender waiting for room in a ring).
	Doorbells uint64
	// Fallback is the packets handed to the fallback backend.
	Fallback uint64
	// Overflow is the packets that waited in a peer's private queue because
	// its ring was full (they left later, in order).
	Overflow uint64
	// Dropped is the packets lost on the way out: a peer's private queue
	// at its bound, a destination without a pairing and without a fallback,
	// a pairing that ended with packets waiting, a packet too large.
	Dropped uint64
	// CorruptRings is the rings found broken (a lying index, length or pad),
	// each ending its pairing; BadICRC the packets out of a ring whose ICRC
	// did not match (a peer scribbling on what it had published).
	CorruptRings, BadICRC uint64
	// RefusedPeers is the rendezvous refused: another user, a bad hello,
	// ring or doorbell, the pairing table full.
	RefusedPeers uint64
	// FailedRendezvous is the destinations found without a pairing to offer
	// (no socket, nobody listening, a refusal).
	FailedRendezvous uint64
}

// stats are a backend's counters.
type stats struct {
	pairings, paired                  atomic.Uint64
	sentPackets, sentBytes            atomic.Uint64
	receivedPackets, receivedBytes    atomic.Uint64
	doorbells                         atomic.Uint64
	fallback, overflow, dropped       atomic.Uint64
	corrupt, badICRC, refused, failed atomic.Uint64
}

func (s *stats) snapshot() Stats {
	return Stats{
		Pairings: s.pairings.Load(), Paired: s.paired.Load(),
		SentPackets: s.sentPackets.Load(), SentBytes: s.sentBytes.Load(),
		ReceivedPackets: s.receivedPackets.Load(), ReceivedBytes: s.receivedBytes.Load(),
		Doorbells: s.doorbells.Load(),
		Fallback:  s.fallback.Load(), Overflow: s.overflow.Load(), Dropped: s.dropped.Load(),
		CorruptRings: s.corrupt.Load(), BadICRC: s.badICRC.Load(),
		RefusedPeers: s.refused.Load(), FailedRendezvous: s.failed.Load(),
	}
}

// Links a destination can use (LinkTo).
const (
	LinkShm        = "shm"        // paired: packets go through the rings
	LinkConnecting = "connecting" // the rendezvous is under way: packets wait in the peer's queue
	LinkFallback   = "fallback"   // no pairing: packets go to the fallback backend
	LinkNone       = "none"       // no pairing and no fallback: packets are dropped
	LinkUntried    = "untried"    // nothing was sent there yet (the next packet tries to pair)
)
