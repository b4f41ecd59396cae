package smcwire

import "encoding/binary"

// LLC messages travel as RC SENDs on an SMC-R link. Common header:
//
//	0 type (1): high nibble LLC version (0 = SMC-Rv1, 2 = SMC-Rv2), low nibble the message
//	1 v1: length (1) = 44; byte 2 low nibble: ADD LINK reject reason
//	1 v2: length (2) = 44..8192 -- in the SENDER'S HOST BYTE ORDER
//	3 flags (1): 0x80 response, the rest per message type
//
// The v2 length quirk: Linux declares the field as a plain u16 and
// assigns it without htons, so Linux on x86 sends it little endian
// ("2c 00" for 44, "58 00" for 88 in the 6.12 captures) while Wireshark
// and the IBM specification read it big endian. ParseLLC takes the
// little-endian reading when it is plausible (44..8192 and within the
// buffer) and falls back to big endian, which is what a big-endian
// (s390x) Linux sends; builders write little endian, what x86 Linux
// expects. The same goes for the rkey count of the ADD LINK v2 extension.
// Because the v2 length occupies byte 2, a v2 ADD LINK has no room for a
// reject reason: Linux writes it and then overwrites it with the length.
const (
	LLCLen       = 44   // every v1 LLC message, and the minimum of v2
	LLCMaxLenV2  = 8192 // largest v2 LLC message
	llcHdrLen    = 4
	llcTypeV2Bit = 0x20
)

// LLCType is byte 0 of an LLC message: version nibble and message type.
type LLCType uint8

// LLC message types, SMC-Rv1 (version nibble 0).
const (
	LLCConfirmLink     LLCType = 0x01
	LLCAddLink         LLCType = 0x02
	LLCAddLinkCont     LLCType = 0x03
	LLCDeleteLink      LLCType = 0x04
	LLCRequestAddLink  LLCType = 0x05
	LLCConfirmRKey     LLCType = 0x06
	LLCTestLink        LLCType = 0x07
	LLCConfirmRKeyCont LLCType = 0x08
	LLCDeleteRKey      LLCType = 0x09
)

// SMC-Rv2 LLC message types (version nibble 2). v2 has no CONTINUE
// variants: larger messages replace them.
const (
	LLCConfirmLinkV2    = LLCConfirmLink | llcTypeV2Bit
	LLCAddLinkV2        = LLCAddLink | llcTypeV2Bit
	LLCDeleteLinkV2     = LLCDeleteLink | llcTypeV2Bit
	LLCRequestAddLinkV2 = LLCRequestAddLink | llcTypeV2Bit
	LLCConfirmRKeyV2    = LLCConfirmRKey | llcTypeV2Bit
	LLCTestLinkV2       = LLCTestLink | llcTypeV2Bit
	LLCDeleteRKeyV2     = LLCDeleteRKey | llcTypeV2Bit
)

var llcNames = [10]string{
	LLCConfirmLink:     "CONFIRM_LINK",
	LLCAddLink:         "ADD_LINK",
	LLCAddLinkCont:     "ADD_LINK_CONT",
	LLCDeleteLink:      "DELETE_LINK",
	LLCRequestAddLink:  "REQUEST_ADD_LINK",
	LLCConfirmRKey:     "CONFIRM_RKEY",
	LLCTestLink:        "TEST_LINK",
	LLCConfirmRKeyCont: "CONFIRM_RKEY_CONT",
	LLCDeleteRKey:      "DELETE_RKEY",
}

// Valid reports whether t is a known LLC type: 0x01-0x09, or one of the
// seven v2 types 0x21, 0x22, 0x24-0x27, 0x29.
func (t LLCType) Valid() bool {
	switch t {
	case LLCConfirmLinkV2, LLCAddLinkV2, LLCDeleteLinkV2, LLCRequestAddLinkV2,
		LLCConfirmRKeyV2, LLCTestLinkV2, LLCDeleteRKeyV2:
		return true
	}
	return t >= LLCConfirmLink && t <= LLCDeleteRKey
}

// Version returns the LLC version of a valid type: 1 or 2.
func (t LLCType) Version() uint8 {
	if t&0xF0 == llcTypeV2Bit {
		return 2
	}
	return 1
}

// Base returns the message type without the version nibble (LLCConfirmLink for 0x21).
func (t LLCType) Base() LLCType { return t & 0x0F }

// String returns the name, e.g. "CONFIRM_LINK" or "DELETE_RKEY_v2", or
// "LLC 0xNN" for an unknown type.
func (t LLCType) String() string {
	if !t.Valid() {
		const hexd = "0123456789abcdef"
		return "LLC 0x" + string([]byte{hexd[t>>4], hexd[t&15]})
	}
	s := llcNames[t.Base()]
	if t.Version() == 2 {
		s += "_v2"
	}
	return s
}

// LLCFlags is byte 3 of an LLC message. 0x80 means response in every
// type; the other bits depend on the type.
type LLCFlags uint8

// LLC flag bits.
const (
	LLCFlagResponse         LLCFlags = 0x80 // all types
	LLCFlagAddLinkReject    LLCFlags = 0x40 // ADD LINK response: rejected
	LLCFlagDeleteAll        LLCFlags = 0x40 // DELETE LINK: all links of the link group
	LLCFlagDeleteOrderly    LLCFlags = 0x20 // DELETE LINK: orderly
	LLCFlagRKeyNegative     LLCFlags = 0x20 // CONFIRM/DELETE RKEY response: negative
	LLCFlagRKeyRetry        LLCFlags = 0x10 // CONFIRM RKEY: retry rkey set
	LLCFlagNoRMBEEyecatcher LLCFlags = 0x03 // CONFIRM LINK: RMBEs carry no eyecatcher (Linux requires it)
)

// LLC is a view of one LLC message as checked by ParseLLC; len(LLC) is the
// message length. Convert it to the view of its Type().Base() (ConfirmLink,
// AddLink, ...) to read the type's fields.
type LLC []byte

// ParseLLC checks b as an LLC message: a known type, for v1 a length byte
// of 44, for v2 a 16-bit length of 44..8192 (little endian as Linux/x86
// sends it, else big endian), at least that many bytes in b, and every
// count of the type fitting in the message. It returns b cut to the
// message length.
func ParseLLC(b []byte) (LLC, error) {
	if len(b) < 1 {
		return nil, ErrShort
	}
	t := LLCType(b[0])
	if !t.Valid() {
		return nil, ErrType
	}
	n, err := llcLength(b, t)
	if err != nil {
		return nil, err
	}
	l := LLC(b[:n])
	if err := l.checkCounts(); err != nil {
		return nil, err
	}
	return l, nil
}

// llcLength decodes and checks the length of a message of type t in b.
func llcLength(b []byte, t LLCType) (int, error) {
	if len(b) < 3 {
		return 0, ErrShort
	}
	if t.Version() == 1 {
		if b[1] != LLCLen {
			return 0, ErrLength
		}
		if len(b) < LLCLen {
			return 0, ErrShort
		}
		return LLCLen, nil
	}
	le := int(binary.LittleEndian.Uint16(b[1:]))
	be := int(binary.BigEndian.Uint16(b[1:]))
	ok := func(n int) bool { return n >= LLCLen && n <= LLCMaxLenV2 }
	switch {
	case ok(le) && le <= len(b):
		return le, nil
	case ok(be) && be <= len(b):
		return be, nil
	case ok(le) || ok(be):
		return 0, ErrShort
	}
	return 0, ErrLength
}

// checkCounts verifies that the entries a message announces fit in it.
func (l LLC) checkCounts() error {
	switch l.Type().Base() {
	case LLCAddLink:
		if len(l) > LLCLen {
			if len(l) < addLinkExtRKeys {
				return ErrLength
			}
			if _, ok := addLinkNumRKeys(l); !ok {
				return ErrCount
			}
		}
	case LLCRequestAddLink:
		if reqAddLinkGIDs+16*int(l[reqAddLinkCount]) > len(l) {
			return ErrCount
		}
	case LLCConfirmRKey:
		if l[4] > confirmRKeyMaxExtra {
			return ErrCount
		}
	case LLCDeleteRKey:
		if l.Version() == 1 && l[4] > deleteRKeyMaxV1 {
			return ErrCount
		}
		if deleteRKeyKeys+4*int(l[4]) > len(l) {
			return ErrCount
		}
	}
	return nil
}

// Type returns the 'type' byte.
func (l LLC) Type() LLCType { return LLCType(l[0]) }

// Version returns the LLC version, 1 or 2.
func (l LLC) Version() uint8 { return l.Type().Version() }

// Length returns the message length (the length field as decoded).
func (l LLC) Length() int { return len(l) }

// Flags returns the 'flags' byte.
func (l LLC) Flags() LLCFlags { return LLCFlags(l[3]) }

// IsResponse reports the response flag.
func (l LLC) IsResponse() bool { return l.Flags()&LLCFlagResponse != 0 }

// Name returns the type name, with " RESP" appended for a response:
// "CONFIRM_LINK_v2 RESP".
func (l LLC) Name() string {
	if l.IsResponse() {
		return l.Type().String() + " RESP"
	}
	return l.Type().String()
}

// startLLC appends a header and the zeroed rest of an n-byte message of
// base type t and returns the extended buffer and the new message.
func startLLC(b []byte, t LLCType, v2 bool, flags LLCFlags, n int) ([]byte, []byte) {
	b, m := grow(b, n)
	m[0] = byte(t.Base())
	if v2 {
		m[0] |= llcTypeV2Bit
		binary.LittleEndian.PutUint16(m[1:], uint16(n)) // host order of Linux/x86, see above
	} else {
		m[1] = LLCLen
	}
	m[3] = byte(flags)
	return b, m
}

// LLCFields holds a decoded LLC message: the header and exactly one of the
// per-type field sets (the one of Type.Base()).
type LLCFields struct {
	Type            LLCType                `json:"llc_type"`
	Flags           LLCFlags               `json:"flags"`
	ConfirmLink     *ConfirmLinkFields     `json:"confirm_link,omitempty"`
	AddLink         *AddLinkFields         `json:"add_link,omitempty"`
	AddLinkCont     *AddLinkContFields     `json:"add_link_cont,omitempty"`
	DeleteLink      *DeleteLinkFields      `json:"delete_link,omitempty"`
	RequestAddLink  *RequestAddLinkFields  `json:"request_add_link,omitempty"`
	ConfirmRKey     *ConfirmRKeyFields     `json:"confirm_rkey,omitempty"`
	ConfirmRKeyCont *ConfirmRKeyContFields `json:"confirm_rkey_cont,omitempty"`
	TestLink        *TestLinkFields        `json:"test_link,omitempty"`
	DeleteRKey      *DeleteRKeyFields      `json:"delete_rkey,omitempty"`
}

// Fields decodes the message into an LLCFields.
func (l LLC) Fields() LLCFields {
	f := LLCFields{Type: l.Type(), Flags: l.Flags()}
	switch l.Type().Base() {
	case LLCConfirmLink:
		v := ConfirmLink(l).Fields()
		f.ConfirmLink = &v
	case LLCAddLink:
		v := AddLink(l).Fields()
		f.AddLink = &v
	case LLCAddLinkCont:
		v := AddLinkCont(l).Fields()
		f.AddLinkCont = &v
	case LLCDeleteLink:
		v := DeleteLink(l).Fields()
		f.DeleteLink = &v
	case LLCRequestAddLink:
		v := RequestAddLink(l).Fields()
		f.RequestAddLink = &v
	case LLCConfirmRKey:
		v := ConfirmRKey(l).Fields()
		f.ConfirmRKey = &v
	case LLCConfirmRKeyCont:
		v := ConfirmRKeyCont(l).Fields()
		f.ConfirmRKeyCont = &v
	case LLCTestLink:
		v := TestLink(l).Fields()
		f.TestLink = &v
	case LLCDeleteRKey:
		v := DeleteRKey(l).Fields()
		f.DeleteRKey = &v
	}
	return f
}

// AppendLLC encodes f with the builder of f.Type.Base(), as version
// f.Type.Version(); a missing field set encodes as zeros. An invalid Type
// appends nothing.
func AppendLLC(b []byte, f *LLCFields) []byte {
	t := f.Type
	if !t.Valid() {
		return b
	}
	v2 := t.Version() == 2
	switch t.Base() {
	case LLCConfirmLink:
		return AppendConfirmLink(b, v2, f.Flags, orZero(f.ConfirmLink))
	case LLCAddLink:
		return AppendAddLink(b, v2, f.Flags, orZero(f.AddLink))
	case LLCAddLinkCont:
		return AppendAddLinkCont(b, f.Flags, orZero(f.AddLinkCont))
	case LLCDeleteLink:
		return AppendDeleteLink(b, v2, f.Flags, orZero(f.DeleteLink))
	case LLCRequestAddLink:
		return AppendRequestAddLink(b, v2, f.Flags, orZero(f.RequestAddLink))
	case LLCConfirmRKey:
		return AppendConfirmRKey(b, v2, f.Flags, orZero(f.ConfirmRKey))
	case LLCConfirmRKeyCont:
		return AppendConfirmRKeyCont(b, f.Flags, orZero(f.ConfirmRKeyCont))
	case LLCTestLink:
		return AppendTestLink(b, v2, f.Flags, orZero(f.TestLink))
	default: // LLCDeleteRKey
		return AppendDeleteRKey(b, v2, f.Flags, orZero(f.DeleteRKey))
	}
}

func orZero[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}
