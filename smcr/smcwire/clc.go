package smcwire

import (
	"encoding/binary"
	"strconv"
)

// CLC eyecatchers: "SMCR" and "SMCD" in EBCDIC. Every CLC message starts
// with one and ends with one (the trailer).
const (
	EyecatcherR uint32 = 0xE2D4C3D9
	EyecatcherD uint32 = 0xE2D4C3C4
)

// CLCHeaderLen is the size of the CLC common header; CLCTrailerLen of the
// trailing eyecatcher.
const (
	CLCHeaderLen  = 8
	CLCTrailerLen = 4
)

// CLCType is byte 4 of a CLC message.
type CLCType uint8

// CLC message types.
const (
	CLCProposal CLCType = 1
	CLCAccept   CLCType = 2
	CLCConfirm  CLCType = 3
	CLCDecline  CLCType = 4
)

func (t CLCType) String() string {
	switch t {
	case CLCProposal:
		return "Proposal"
	case CLCAccept:
		return "Accept"
	case CLCConfirm:
		return "Confirm"
	case CLCDecline:
		return "Decline"
	}
	return "CLC type " + strconv.Itoa(int(t))
}

// SMCType is the 2-bit SMC variant field of CLC byte 7 (typev1, typev2).
type SMCType uint8

// SMC variants.
const (
	TypeR SMCType = 0 // SMC-R
	TypeD SMCType = 1 // SMC-D
	TypeN SMCType = 2 // none
	TypeB SMCType = 3 // both
)

func (t SMCType) String() string {
	switch t & 3 {
	case TypeR:
		return "SMC-R"
	case TypeD:
		return "SMC-D"
	case TypeN:
		return "none"
	}
	return "SMC-R/SMC-D"
}

// HasR reports whether the variant includes SMC-R.
func (t SMCType) HasR() bool { return t == TypeR || t == TypeB }

// HasD reports whether the variant includes SMC-D.
func (t SMCType) HasD() bool { return t == TypeD || t == TypeB }

// CLC byte 7 is version<<4 | typev2<<2 | typev1 (RFC 7609 draws it MSB
// first; Linux's bitfield lists typev1 first on little-endian hosts). In
// Accept, Confirm and Decline the upper typev2 bit (0x08) is the
// first-contact flag (Decline: "out of sync"), the lower (0x04) unused.
const (
	clcFlagFirstContact = 0x08
	clcMaxLen           = 0xFFFF
)

// CLC is a view of a whole CLC message (header through trailer) as checked
// by ParseCLC. The typed views (Proposal, AcceptConfirm, Decline) add the
// type-specific fields.
//
//	0      4      5        7       8
//	+------+------+--------+-------+-------------------+-----------+
//	| eye  | type | length | flags | body ...          | trailer   |
//	+------+------+--------+-------+-------------------+-----------+
type CLC []byte

// ParseCLC checks the CLC common header of b: an SMC-R or SMC-D eyecatcher,
// a version other than 0, a length field covering at least the header and
// trailer and no more than b holds, and a trailer that is one of the two
// eyecatchers (Linux accepts either, whatever the header says). It returns
// the message, b cut to the length field: a TCP segment may carry more.
func ParseCLC(b []byte) (CLC, error) {
	if len(b) < CLCHeaderLen {
		return nil, ErrShort
	}
	if ec := binary.BigEndian.Uint32(b); ec != EyecatcherR && ec != EyecatcherD {
		return nil, ErrEyecatcher
	}
	if b[7]>>4 == 0 {
		return nil, ErrVersion
	}
	n := int(binary.BigEndian.Uint16(b[5:]))
	if n < CLCHeaderLen+CLCTrailerLen {
		return nil, ErrLength
	}
	if n > len(b) {
		return nil, ErrShort
	}
	if tr := binary.BigEndian.Uint32(b[n-CLCTrailerLen:]); tr != EyecatcherR && tr != EyecatcherD {
		return nil, ErrTrailer
	}
	return CLC(b[:n]), nil
}

// IsCLC reports whether a TCP payload starts with a CLC eyecatcher, the way
// Wireshark's heuristic recognises CLC traffic. It does not check the rest.
func IsCLC(tcpPayload []byte) bool {
	if len(tcpPayload) < 4 {
		return false
	}
	ec := binary.BigEndian.Uint32(tcpPayload)
	return ec == EyecatcherR || ec == EyecatcherD
}

// Eyecatcher returns bytes 0-3 (EyecatcherR or EyecatcherD).
func (c CLC) Eyecatcher() uint32 { return binary.BigEndian.Uint32(c) }

// IsSMCD reports whether the eyecatcher is "SMCD".
func (c CLC) IsSMCD() bool { return c.Eyecatcher() == EyecatcherD }

// Type returns the message type (byte 4).
func (c CLC) Type() CLCType { return CLCType(c[4]) }

// Length returns the 'length' field (bytes 5-6): the whole message.
func (c CLC) Length() int { return int(binary.BigEndian.Uint16(c[5:])) }

// Version returns the SMC version (bits 7-4 of byte 7): 1 or 2.
func (c CLC) Version() uint8 { return c[7] >> 4 }

// TypeV2 returns the SMCv2 variant (bits 3-2 of byte 7); meaningful in a
// Proposal (in other messages bit 3 is FirstContact).
func (c CLC) TypeV2() SMCType { return SMCType(c[7]>>2) & 3 }

// TypeV1 returns the SMCv1 variant (bits 1-0 of byte 7): in a Proposal what
// is offered for v1, in Accept/Confirm the variant chosen.
func (c CLC) TypeV1() SMCType { return SMCType(c[7]) & 3 }

// FirstContact returns the first-contact flag of Accept/Confirm (0x08 of
// byte 7): the sender creates a new link group.
func (c CLC) FirstContact() bool { return c[7]&clcFlagFirstContact != 0 }

// OutOfSync returns the same bit in a Decline: the peer must tear down the
// link group.
func (c CLC) OutOfSync() bool { return c.FirstContact() }

// Trailer returns the trailing eyecatcher.
func (c CLC) Trailer() uint32 { return binary.BigEndian.Uint32(c[len(c)-CLCTrailerLen:]) }

// Name returns e.g. "Proposal v2" or "Accept v2 first contact".
func (c CLC) Name() string {
	s := c.Type().String() + " v" + strconv.Itoa(int(c.Version()))
	if (c.Type() == CLCAccept || c.Type() == CLCConfirm) && c.FirstContact() {
		s += " first contact"
	}
	if c.Type() == CLCDecline && c.OutOfSync() {
		s += " out of sync"
	}
	return s
}

// CLCHeader holds the common header fields a builder needs.
type CLCHeader struct {
	SMCD         bool    `json:"smcd"`          // eyecatcher "SMCD" instead of "SMCR" (header and trailer)
	Version      uint8   `json:"version"`       // 1 or 2
	TypeV2       SMCType `json:"typev2"`        // Proposal only
	TypeV1       SMCType `json:"typev1"`        // Proposal: offered v1 variant; Accept/Confirm: the chosen variant
	FirstContact bool    `json:"first_contact"` // Accept/Confirm; in a Decline: out of sync
}

// Header returns the common header fields.
func (c CLC) Header() CLCHeader {
	h := CLCHeader{SMCD: c.IsSMCD(), Version: c.Version(), TypeV1: c.TypeV1()}
	if c.Type() == CLCProposal {
		h.TypeV2 = c.TypeV2()
	} else {
		h.FirstContact = c.FirstContact()
	}
	return h
}

// startCLC appends a CLC header with a zero length; finishCLC appends the
// trailer and fills in the length. Together they frame every builder.
func startCLC(b []byte, t CLCType, h CLCHeader) ([]byte, int) {
	start := len(b)
	ec := EyecatcherR
	if h.SMCD {
		ec = EyecatcherD
	}
	b = binary.BigEndian.AppendUint32(b, ec)
	flags := h.Version<<4 | byte(h.TypeV1&3)
	if t == CLCProposal {
		flags |= byte(h.TypeV2&3) << 2
	} else if h.FirstContact {
		flags |= clcFlagFirstContact
	}
	b = append(b, byte(t), 0, 0, flags)
	return b, start
}

func finishCLC(b []byte, start int) []byte {
	b = append(b, b[start:start+4]...)
	binary.BigEndian.PutUint16(b[start+5:], uint16(len(b)-start))
	return b
}
