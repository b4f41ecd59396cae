package udp

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// segmentCmsgLen is the room for a UDP_SEGMENT control message (send),
// which carries the segment size as a uint16. (UDP_GRO, on receive, carries
// it as an int.)
var segmentCmsgLen = unix.CmsgSpace(2)

// putSegmentCmsg writes a UDP_SEGMENT control message for segments of size
// bytes into b (segmentCmsgLen bytes, 8-aligned) and returns its length.
func putSegmentCmsg(b []byte, size uint16) int {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level = unix.SOL_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], size)
	return segmentCmsgLen
}

// groSegment returns the segment size of a GRO super-datagram from its
// control messages, or 0 when the message is a single packet.
func groSegment(oob []byte) int {
	for len(oob) >= unix.SizeofCmsghdr {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return 0
		}
		if h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4 {
			return int(binary.NativeEndian.Uint32(data))
		}
		oob = rest
	}
	return 0
}
