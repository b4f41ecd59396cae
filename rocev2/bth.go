package rocev2

import "encoding/binary"

// BTH is a view of the 12-byte Base Transport Header.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    OpCode     |S|M|Pad|  TVer |            P_Key              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|F|B|  resv6    |              Destination QP                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|   resv7     |               Packet Sequence Number          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Byte 4 (FECN, BECN, resv6) is a variant field: switches may set FECN, so
// the destination QP is always the low 24 bits of bytes 4-7.
type BTH []byte

// BTHLen is the size of the BTH.
const BTHLen = 12

const (
	bthOpcode = 0
	bthFlags  = 1
	bthPKey   = 2
	bthQP     = 4
	bthPSN    = 8

	bthSE     = 0x80
	bthMigReq = 0x40
	bthFECN   = 0x80
	bthBECN   = 0x40
	bthAckReq = 0x80
)

// Opcode returns the 'OpCode' field.
func (b BTH) Opcode() Opcode { return Opcode(b[bthOpcode]) }

// SE returns the 'Solicited Event' bit.
func (b BTH) SE() bool { return b[bthFlags]&bthSE != 0 }

// MigReq returns the 'MigReq' bit.
func (b BTH) MigReq() bool { return b[bthFlags]&bthMigReq != 0 }

// PadCount returns the 'PadCnt' field: bytes of pad after the payload.
func (b BTH) PadCount() int { return int(b[bthFlags]>>4) & 3 }

// TVer returns the 'Transport Header Version' field.
func (b BTH) TVer() uint8 { return b[bthFlags] & 0x0F }

// PKey returns the 'Partition Key' field.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[bthPKey:]) }

// FECN returns the 'Forward ECN' bit.
func (b BTH) FECN() bool { return b[bthQP]&bthFECN != 0 }

// BECN returns the 'Backward ECN' bit.
func (b BTH) BECN() bool { return b[bthQP]&bthBECN != 0 }

// DestQP returns the 24-bit 'Destination QP' field.
func (b BTH) DestQP() uint32 { return binary.BigEndian.Uint32(b[bthQP:]) & 0xFFFFFF }

// AckReq returns the 'Acknowledge Request' bit.
func (b BTH) AckReq() bool { return b[bthPSN]&bthAckReq != 0 }

// PSN returns the 24-bit 'Packet Sequence Number'.
func (b BTH) PSN() PSN { return PSN(binary.BigEndian.Uint32(b[bthPSN:]) & PSNMask) }

// SetOpcode sets the 'OpCode' field.
func (b BTH) SetOpcode(op Opcode) { b[bthOpcode] = byte(op) }

// SetSE sets the 'Solicited Event' bit.
func (b BTH) SetSE(v bool) { setBit(&b[bthFlags], bthSE, v) }

// SetMigReq sets the 'MigReq' bit.
func (b BTH) SetMigReq(v bool) { setBit(&b[bthFlags], bthMigReq, v) }

// SetPadCount sets the 'PadCnt' field (0..3).
func (b BTH) SetPadCount(n int) { b[bthFlags] = b[bthFlags]&^0x30 | byte(n&3)<<4 }

// SetTVer sets the 'Transport Header Version' field.
func (b BTH) SetTVer(v uint8) { b[bthFlags] = b[bthFlags]&^0x0F | v&0x0F }

// SetPKey sets the 'Partition Key' field.
func (b BTH) SetPKey(k uint16) { binary.BigEndian.PutUint16(b[bthPKey:], k) }

// SetFECN sets the 'Forward ECN' bit.
func (b BTH) SetFECN(v bool) { setBit(&b[bthQP], bthFECN, v) }

// SetBECN sets the 'Backward ECN' bit.
func (b BTH) SetBECN(v bool) { setBit(&b[bthQP], bthBECN, v) }

// SetDestQP sets the 'Destination QP' field, keeping FECN/BECN.
func (b BTH) SetDestQP(qpn uint32) {
	b[bthQP+1], b[bthQP+2], b[bthQP+3] = byte(qpn>>16), byte(qpn>>8), byte(qpn)
}

// SetAckReq sets the 'Acknowledge Request' bit.
func (b BTH) SetAckReq(v bool) { setBit(&b[bthPSN], bthAckReq, v) }

// SetPSN sets the 'Packet Sequence Number', keeping AckReq.
func (b BTH) SetPSN(p PSN) {
	b[bthPSN+1], b[bthPSN+2], b[bthPSN+3] = byte(p>>16), byte(p>>8), byte(p)
}

// Reserved returns the reserved bits: resv6 of byte 4 and resv7 of byte 8.
// Senders write zero; receivers ignore them.
func (b BTH) Reserved() (resv6, resv7 uint8) { return b[bthQP] & 0x3F, b[bthPSN] & 0x7F }

func setBit(p *byte, mask byte, v bool) {
	if v {
		*p |= mask
	} else {
		*p &^= mask
	}
}
