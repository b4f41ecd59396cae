// Package rocev2 is the RoCEv2 wire format: what a packet is, byte by byte,
// and nothing about how it travels (that is package backend and the
// backends below it).
//
//   - Header views (BTH, RETH, AETH, AtomicETH, AtomicAckETH, DETH, ImmDt,
//     IETH) over the caller's bytes: zero-copy, nothing allocated.
//   - One opcode table for RC, UC, UD and CNP that drives both Packet.Parse
//     (every length checked before use, typed ParseError reasons a device
//     counts) and Fields.Append / Fields.AppendHeaders (the builder).
//   - 24-bit PSN arithmetic (PSN.Before, After, InRange), MTUs, AETH
//     syndromes and their timers.
//   - The ICRC over the IP and UDP headers a packet travels in (Flow,
//     ICRCFromHeaders), for IPv4 and IPv6, and the recovery of the IPv4 ID
//     a UDP socket cannot see (Flow.InferIPv4ID: the CRC is linear).
//   - Whole Ethernet frames (ParseEthernetFrame) and rxe's UDP source port
//     and flow label rules (SourcePort).
//
// Every packet in the bundled kernel rxe captures parses, verifies and is
// rebuilt byte for byte from its fields (conformance/).
package rocev2
