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

// rxControl is what a received message's control messages say: its GRO
// segment size (0: one packet) and the IP TTL and TOS it arrived with (the
// IPv6 hop limit and traffic class).
type rxControl struct {
	seg      int
	ttl, tos uint8
}

// parseControl reads the control messages of a received message. Anything
// it does not know, or that is cut short, is skipped: the kernel's word is
// checked here like every other field of a message.
func parseControl(oob []byte) rxControl {
	var c rxControl
	for len(oob) >= unix.SizeofCmsghdr {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return c
		}
		switch {
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			c.seg = int(binary.NativeEndian.Uint32(data))
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TTL && len(data) >= 4:
			c.ttl = uint8(binary.NativeEndian.Uint32(data))
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			c.tos = data[0]
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_HOPLIMIT && len(data) >= 4:
			c.ttl = uint8(binary.NativeEndian.Uint32(data))
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			c.tos = uint8(binary.NativeEndian.Uint32(data))
		}
		oob = rest
	}
	return c
}
