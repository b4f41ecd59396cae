// Package udp is goroce's default backend.Backend: one unconnected UDP socket
// bound to a specific address, driven with sendmmsg and recvmmsg, with UDP
// GSO and GRO where the kernel has them (Linux; elsewhere Open returns the
// Portable backend, one datagram per system call through the standard library).
//
// # Send path
//
//  1. Send plans up to BatchSize datagrams at a time into messages: a run of
//     consecutive datagrams to the same destination whose sizes are equal
//     (the last may be shorter) becomes one GSO message, its packets the
//     message's iovecs and a UDP_SEGMENT control message giving their size;
//     any other datagram is a message of its own.
//  2. Each packet's ICRC is sealed in place, for the flow from LocalAddr to
//     its destination and for the IPv4 ID it will leave with: the kernel
//     sends a plain DF datagram of an unconnected socket with ID 0, and cuts
//     a GSO message into segments with IDs 0, 1, 2, … (see IPv4 IDs below).
//  3. One sendmmsg hands the messages to the kernel. If the kernel refuses
//     GSO (EIO: no checksum offload on the route's device; EINVAL), GSO is
//     switched off for good and the rest is planned again without it.
//
// # Receive path
//
//  1. One recvmmsg fills backend-owned 64 KiB buffers, one per message; with
//     GRO, a message may hold several packets of one flow back to back, and
//     a UDP_GRO control message gives their size.
//  2. Receive splits messages into packets and hands them out; what does not
//     fit in the caller's slice is kept for the next call, so no buffer is
//     reused before the caller is done with it.
//  3. Each packet gets an ICRC verdict. IPv6 has no ID: the full flow is
//     known and the ICRC is verified. IPv4 covers the ID, which a UDP socket
//     never sees: rocev2.Flow.InferIPv4ID recovers the ID the ICRC was sealed
//     for (0 for most peers, k for GSO segment k), and a packet no ID fits is
//     ICRCBad.
//
// # IPv4 IDs (verified on Linux 6.18)
//
// An unconnected UDP socket with IP_MTU_DISCOVER=IP_PMTUDISC_DO sends every
// plain datagram with ID 0. A UDP_SEGMENT send leaves as segments with IDs
// 0, 1, 2, …: the kernel numbers the segments it cuts. On lo the segments are
// never cut on the way out (a capture shows the super-packet); on a device
// without UDP segmentation offload they are, and veth_test.go checks the IDs
// and ICRCs of the segments on the wire.
//
// # Addresses
//
// The ICRC covers both IP addresses, so the backend must know the address it
// sends from: Open refuses an unspecified address (0.0.0.0, ::), and that
// address is also the destination of every packet it receives.
//
// # Allocation
//
// Message headers, iovecs, socket addresses, control buffers and receive
// buffers are allocated once by Open. Send and Receive make their system
// calls through syscall.RawConn with callbacks bound once, and decode socket
// addresses into netip values: in steady state neither path allocates.
// (golang.org/x/net's ReadBatch would allocate a *net.UDPAddr per message.)
package udp
