// Package backend is the seam between a goroce device and the network: the
// Backend interface that moves batches of RoCEv2 packets (UDP payloads,
// BTH through ICRC), and the two halves of a packet's life at that seam,
// Outgoing and Incoming, with who owns what stated once.
//
// The backends live below it: udp (the default: a UDP socket, sendmmsg and
// recvmmsg with GSO and GRO on Linux, the standard library elsewhere),
// afpacket (whole Ethernet frames on an interface, as rxe), memlink (an
// in-memory network) and faulty (a fault-injecting decorator); pcap.Tap is
// a capturing decorator. backendtest holds the checks every backend runs.
// A device (rocev2/device) takes any of them and imports none: the program
// chooses, as wireguard-go's programs choose their conn.Bind.
//
// Ownership, as gVisor's PacketBuffer and wireguard-go's conn.Bind state
// theirs:
//
//   - Send borrows each Outgoing's Buf for the call only. When it returns,
//     Buf holds the packet sealed for the headers it left in and Wire says
//     what those were; the caller may reuse Buf at once. A backend that
//     keeps a packet (a neighbour not yet resolved, a delay) keeps a copy.
//   - Receive and TryReceive lend each Incoming's Buf until the next
//     Receive or TryReceive on that backend; the backend never changes it
//     before then, and a caller that needs it longer copies it.
//   - Receive is called by one goroutine at a time; Send by any number.
package backend
