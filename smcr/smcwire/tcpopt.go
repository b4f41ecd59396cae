package smcwire

import "encoding/binary"

// The SMC TCP option: experimental option kind 254, length 6, with the
// "SMCR" eyecatcher as its magic (ExID 0xE2D4). A client puts it in its
// SYN on an AF_SMC socket; a server echoes it in the SYN-ACK only if the
// SYN had it. Linux aligns it with two NOPs: 01 01 FE 06 E2 D4 C3 D9.
const (
	TCPOptionKind = 254
	TCPOptionLen  = 6
)

// HasSMCOption reports whether a TCP options area (the bytes after the
// 20-byte TCP header, up to the data offset) carries the SMC option. It
// walks the options by their length bytes and stops at End of Option List
// or at a malformed length.
func HasSMCOption(opts []byte) bool {
	for i := 0; i < len(opts); {
		switch opts[i] {
		case 0: // End of Option List
			return false
		case 1: // NOP
			i++
			continue
		}
		if i+1 >= len(opts) {
			return false
		}
		n := int(opts[i+1])
		if n < 2 || i+n > len(opts) {
			return false
		}
		if IsSMCOption(opts[i], opts[i+2:i+n]) {
			return true
		}
		i += n
	}
	return false
}

// IsSMCOption reports whether an option of this kind and data (after the
// kind and length bytes) is the SMC option. As Linux's TCP parser: an even
// length of at least 6 whose first four data bytes are the magic.
func IsSMCOption(kind byte, data []byte) bool {
	n := len(data) + 2
	return kind == TCPOptionKind && n >= TCPOptionLen && n%2 == 0 && binary.BigEndian.Uint32(data) == EyecatcherR
}

// AppendSMCOption appends the option as Linux sends it, 4-byte aligned
// behind two NOPs.
func AppendSMCOption(b []byte) []byte {
	b = append(b, 1, 1, TCPOptionKind, TCPOptionLen)
	return binary.BigEndian.AppendUint32(b, EyecatcherR)
}
