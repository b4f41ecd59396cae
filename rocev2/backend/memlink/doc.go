// Package memlink is an in-memory network of rocev2.Backends for tests, the
// way wireguard-go's bindtest stands in for UDP: devices attached to one
// Network exchange packets by copy, deterministically and without sockets.
//
// It behaves like a small, perfect Ethernet segment with a NIC per backend:
//
//   - Send seals each packet's ICRC for the flow from the sender's address to
//     the destination with IPv4 ID 0 (what the UDP backend sends without
//     GSO), copies it and appends it to the destination's receive queue,
//     before Send returns; delivery is FIFO per sender and receiver.
//   - A packet to an address nobody is attached to, a packet larger than the
//     MTU, and a packet that finds the receiver's queue full are dropped and
//     counted, as a real network would drop them; Send does not report them.
//   - Receive verifies each ICRC against the flow it arrived in.
//
// Copies go into buffers recycled between a receiver's queue and its
// callers: in steady state neither Send nor Receive allocates.
package memlink
