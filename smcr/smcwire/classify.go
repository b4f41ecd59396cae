package smcwire

import "encoding/binary"

// Kind says what an RC SEND payload carries.
type Kind uint8

// Payload kinds.
const (
	KindNone  Kind = iota // not an SMC-R message
	KindCDC               // CDC message (ParseCDC)
	KindLLCv1             // SMC-Rv1 LLC message (ParseLLC)
	KindLLCv2             // SMC-Rv2 LLC message (ParseLLC)
)

func (k Kind) String() string {
	switch k {
	case KindCDC:
		return "CDC"
	case KindLLCv1:
		return "LLCv1"
	case KindLLCv2:
		return "LLCv2"
	}
	return "none"
}

// Classify says whether the payload of a complete RC SEND (a SEND_ONLY
// packet, ICRC and pad removed) is an SMC-R CDC or LLC message. A
// receive buffer gets exactly one message per SEND, so the length must
// match exactly, which keeps other RDMA traffic (ibv_rc_pingpong, rping)
// from looking like SMC:
//
//   - CDC: byte 0 is 0xFE, byte 1 is 44, 44 bytes.
//   - LLC v1: byte 0 is 0x01-0x09, byte 1 is 44, 44 bytes.
//   - LLC v2: byte 0 is a v2 type (0x21, 0x22, 0x24-0x27, 0x29) and the
//     16-bit length at bytes 1-2 equals the payload length, read little
//     endian (Linux/x86) or big endian. A 44-byte v2 message therefore
//     also has byte 1 == 44, like v1: the type's high nibble decides.
//
// The message must also pass ParseLLC/ParseCDC (counts that fit), so a
// classified payload always parses.
func Classify(payload []byte) Kind {
	if len(payload) < LLCLen {
		return KindNone
	}
	if payload[0] == CDCType {
		if payload[1] == CDCLen && len(payload) == CDCLen {
			return KindCDC
		}
		return KindNone
	}
	t := LLCType(payload[0])
	if !t.Valid() {
		return KindNone
	}
	if t.Version() == 1 {
		if payload[1] != LLCLen || len(payload) != LLCLen {
			return KindNone
		}
	} else {
		n := len(payload)
		if int(binary.LittleEndian.Uint16(payload[1:])) != n && int(binary.BigEndian.Uint16(payload[1:])) != n {
			return KindNone
		}
	}
	l, err := ParseLLC(payload)
	if err != nil || len(l) != len(payload) {
		return KindNone
	}
	if t.Version() == 2 {
		return KindLLCv2
	}
	return KindLLCv1
}
