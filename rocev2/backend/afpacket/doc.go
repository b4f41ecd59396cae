// Package afpacket is a backend.Backend on an AF_PACKET socket: goroce as a
// NIC-level RoCEv2 device on one Ethernet interface, as rdma_rxe is. It
// sends and receives whole frames, so it writes the Ethernet, IP and UDP
// headers itself, sees the real IP header of every packet it receives
// (the ICRC is checked in full over the real IPv4 ID, nothing inferred:
// backend.ICRCVerified), chooses its UDP source port per QP as rxe does,
// and does not need the kernel's UDP port 4791 for itself. Linux only;
// it needs CAP_NET_RAW (Open's error wraps ErrNoCapNetRaw and names the
// UDP backend as the way without it).
//
// # Send path
//
// Send builds each datagram's headers into a preallocated slot and hands
// the kernel, per sendmmsg of up to BatchSize frames, two iovecs a frame:
// the headers (behind a zero virtio_net_hdr) and the caller's packet,
// which is never copied. The headers are rxe's (drivers/infiniband/sw/rxe/
// rxe_net.c):
//
//   - UDP source port from the QP (Outgoing.Sender): for RC and UC,
//     rdma_get_udp_sport of the address vector's flow label, or of the
//     label ib_core derives from the two QP numbers; for UD, the port rxe
//     gives a QP at creation (rocev2.SourcePort). Destination port 4791.
//     UDP checksum 0.
//   - IPv4: DF, one ID sequence per device (rxe's IDs count up per
//     destination), TOS from the address vector. IPv6: the flow label of
//     the source port (rxe writes 0; RNICs write the vector's), traffic
//     class from the vector. The TTL / hop limit is the system's
//     (net.ipv4.ip_default_ttl, the interface's IPv6 hop_limit), whatever
//     the vector says, as Linux's RDMA core replaces a unicast RoCE
//     vector's hop limit with the route's for rxe.
//   - Ethernet: the interface's MAC, and the next hop's from the kernel's
//     neighbour table.
//
// The ICRC is sealed over exactly those headers. Outgoing.Wire says
// what each packet left with (its IPv4 ID and source port).
//
// # Neighbours
//
// The next hop and its MAC come from the kernel's tables over rtnetlink,
// as ib_core finds them for rxe: RTM_GETROUTE from the device's address
// through its interface (a gateway route gives the gateway), RTM_GETNEIGH
// for the hop's MAC. When the kernel has no valid entry, the backend asks
// it to resolve one with RTM_NEWNEIGH and NTF_USE — neigh_event_send, what
// ib_core's address resolution calls — never with an ARP of its own, and
// asks again with backoff. Packets to a destination being resolved wait,
// copied, in slots allocated once (the kernel queues a packet on an
// incomplete neighbour the same way); a destination that does not resolve
// in 3 s fails its waiting packets and refuses sends for a second.
//
// # Receive path
//
// The socket is bound to the address family's EtherType on the interface,
// with a classic BPF filter (attached before the bind, so nothing else is
// ever queued) that takes UDP to port 4791 for the device's address and
// the frames the device counts as drops (fragments, IPv6 extension
// headers). One recvmmsg fills up to BatchSize buffers, each with the
// frame's packet type (sockaddr_ll), PACKET_AUXDATA (VLAN tag, checksum
// state) and virtio_net_hdr (PACKET_VNET_HDR: a virtual link such as veth
// passes a UDP GSO send on unsegmented, and the backend cuts it into the
// segments with the headers segmentation gives them).
//
// Config.Receive = ReceiveRing receives through a TPACKET_V3 ring
// instead (PACKET_RX_RING, mapped; ring_linux.go): the kernel fills blocks
// with the same frame, packet type, status and virtio_net_hdr, and hands a
// block over when it is full or its retire timer fires. The backend walks
// the blocks the process owns (TP_STATUS_USER), copies each frame into the
// buffers recvmmsg would fill, gives each block back (TP_STATUS_KERNEL) as
// soon as it is copied, and waits in the runtime poller when the next
// block is the kernel's. Every number in a block (num_pkts,
// offset_to_first_pkt, tp_next_offset, tp_mac, tp_snaplen) is checked
// against the block; a block whose numbers lead outside it is skipped from
// there and counted (Stats.BadBlocks; FuzzBlockWalk). The copy is what
// keeps Close safe: the device may still read the Bufs of a batch when
// another goroutine closes the backend and unmaps the ring.
//
// recvmmsg is the default because it is the faster of the two where it
// counts (README, make bench-afpacket, five rounds over veth): RDMA WRITE
// of 64 KiB moved 1.97 Gbit/s with recvmmsg and 2.06 with the ring
// (medians; per-round ratios 0.80–1.31 over two runs: the same within the
// noise), but the 64-byte SEND latency was 5.5 µs against 502 µs one way:
// a lone packet (a ping-pong's, an ACK) waits in its block for the retire
// timer, which the kernel counts in milliseconds. For the receive path
// alone, BenchmarkVethReceive (a flood of 1 KiB frames) puts the ring at
// 0.77–1.17× recvmmsg's time per frame, median 0.93×.
//
// Every frame is
// checked field by field: truncated or lying Ethernet, IP and UDP headers,
// IPv4 options, fragments, VLAN tags, wrong IPv4 header or UDP checksums,
// frames longer than the MTU, frames not to this host or address, senders
// that cannot be (multicast, loopback, the device's own address). Each is
// dropped with a rocev2.ParseError the device counts; nothing panics or
// reads out of bounds (FuzzCheck, FuzzReceive).
//
// # What changes on the host
//
// The host's stack receives every frame the device consumes too, and
// with no socket on UDP 4791 it would answer each with an ICMP port
// unreachable. So the backend binds one UDP socket to the device's address
// and port 4791, with a socket filter that drops every datagram before it
// is queued: the host then neither answers nor keeps anything (the drops
// show in /proc/net/udp). That socket is the only change; Close closes it,
// and so does the process's end, however it ends. The port must be free:
// a kernel rdma_rxe or a goroce UDP backend on the same address would
// serve the same packets, and Open refuses. The neighbour entries the
// kernel creates on the backend's request are ordinary ones that age out.
// The host must own the device's address (the kernel answers ARP and
// neighbour solicitations for it).
//
// # Not done
//
// Sends are one frame per packet (no GSO towards the interface),
// which costs bandwidth on veth against the UDP backend's GSO (README).
// An MTU change after Open is not followed.
package afpacket
