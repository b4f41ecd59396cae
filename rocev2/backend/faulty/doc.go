// Package faulty wraps a backend.Backend with deterministic fault injection,
// for testing how a device copes with an imperfect network: loss,
// duplication, reordering, delay and corruption.
//
// # Determinism
//
// Every decision comes from a PCG generator seeded from Config.Seed, and
// each packet consumes the same seven draws in the same order whatever the
// outcome (loss, mangle, mangle bit, duplicate, delay, reorder, reorder
// distance), so a seed and a sequence of sends always give the same faults,
// and changing one probability does not shift the decisions of the others.
// Received packets draw from a second generator (corrupt, corrupt bit), so
// the receive side is deterministic for a given sequence of receives
// whatever the sends interleave with it. Only the timing of delayed packets
// depends on the clock.
//
// # Faults on send (egress)
//
//   - Loss: the packet is dropped.
//   - Mangle: a bit of the BTH is flipped before the inner backend seals the
//     ICRC, so the packet arrives ICRCOK but malformed: a buggy peer, not a
//     bad wire.
//   - Duplicate: a copy is sent right after the packet (wherever it goes).
//   - Delay (DelayRate of the packets): held for Delay, then sent by the
//     wrapper's one goroutine, which owns a single timer.
//   - Reorder: held back until 1 to 3 later packets have been sent, then
//     sent after them; Flush releases every held packet at once.
//
// At most MaxHold packets are held (delayed or reordered); a packet that
// finds the hold full is sent on time and counted in Stats.HoldFull.
//
// # Corruption on receive
//
// The inner backend seals the ICRC inside its Send, after the wrapper has
// seen the packet, so a bit flipped on the send side would be sealed over
// and go unnoticed: that is Mangle. A bad wire is modelled on the receive
// side instead: with probability Corrupt, one bit of a received packet is
// flipped and its verdict turned from ICRCOK to ICRCBad. That is what the
// receiver would have found on the wire: CRC-32 catches every single-bit
// error in the bytes it covers, and the flipped bit is never in BTH byte 4
// (FECN, BECN, resv6), the only byte of the UDP payload the ICRC masks.
// (A UDP receiver that infers IPv4 IDs from the ICRC keeps 16 bits of check,
// so a real one could miss about one corruption in 65536; this one misses
// none.) A packet the inner left ICRCUnchecked stays so (the device checks
// it and finds the flip).
package faulty
