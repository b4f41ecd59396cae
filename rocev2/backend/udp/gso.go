package udp

import (
	"net/netip"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// GSO limits.
const (
	// maxGSOSegments is the most segments one UDP_SEGMENT send may carry:
	// the kernel's UDP_MAX_SEGMENTS, 64 on older kernels and 128 on newer
	// ones; 64 works everywhere.
	maxGSOSegments = 64
	// maxGSOBytes bounds the UDP payload of one GSO send: the super-datagram
	// must fit an IP packet of 64 KiB with its headers, before segmentation.
	maxGSOBytes = 65000
	// minGSOSegments is the fewest datagrams worth a GSO send. The kernel
	// cuts a GSO message in a pass of its own before the first segment
	// leaves, and every segment after the first carries a non-zero IPv4 ID
	// whose ICRC a receiver recovers rather than checks directly: for a
	// data packet followed by an ACK, plain datagrams in the same sendmmsg
	// are cheaper (64 B ping-pong: 3.7 µs one way with a 2-segment GSO
	// send, 3.1 µs without).
	minGSOSegments = 3
)

// gsoRun returns how many datagrams from the start of pkts can leave as one
// UDP_SEGMENT message to dst: consecutive datagrams to dst, all as long as
// the first except possibly the last, which may be shorter. The kernel cuts
// the message into segments of the first datagram's size, so any other shape
// would come out as different packets than the ones we sealed.
//
// maxSegs bounds the count (segments per send, free iovecs) and maxSeg the
// size of a segment: a segment larger than the path MTU would make the
// kernel refuse the whole send with EINVAL rather than fragment it.
func gsoRun(pkts []backend.Outgoing, dst netip.AddrPort, maxSegs, maxSeg int) int {
	size := len(pkts[0].Buf)
	if size > maxSeg {
		return 1
	}
	total, k := size, 1
	for k < len(pkts) && k < maxSegs {
		p := &pkts[k]
		n := len(p.Buf)
		if !sameDest(p.Dst, dst) || n > size || n < rocev2.ICRCLen || total+n > maxGSOBytes {
			break
		}
		total += n
		k++
		if n < size { // a short segment ends the message
			break
		}
	}
	if k < minGSOSegments {
		return 1
	}
	return k
}

// sameDest reports whether a datagram's destination is dst, which is already
// normalized (IPv4 unmapped).
func sameDest(a, dst netip.AddrPort) bool {
	return a.Port() == dst.Port() && a.Addr().Unmap() == dst.Addr()
}
