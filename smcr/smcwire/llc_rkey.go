package smcwire

import "encoding/binary"

// An RToken names an RMB on one link: the byte before it is the link ID
// (or, in the first rtoken of CONFIRM RKEY, the count of rtokens after it).
//
//	0 link ID / count (1)   1 rkey (4)   5 virtual address (8)
const rtokenLen = 13

// RToken is one rkey/virtual address pair of CONFIRM RKEY (CONTINUE).
type RToken struct {
	LinkID uint8  `json:"link_id"` // link the rkey is valid on (0 for the sending link's own entry)
	RKey   uint32 `json:"rkey"`    // 'rkey'
	VA     uint64 `json:"va"`      // 'virtual address'
}

func rtokenAt(b []byte) RToken {
	return RToken{b[0], binary.BigEndian.Uint32(b[1:]), binary.BigEndian.Uint64(b[5:])}
}

func putRToken(b []byte, t RToken) {
	b[0] = t.LinkID
	binary.BigEndian.PutUint32(b[1:], t.RKey)
	binary.BigEndian.PutUint64(b[5:], t.VA)
}

// CONFIRM RKEY (0x06 / 0x26; v2 keeps the v1 layout), after the header:
// three rtokens (13 each), reserved (1). The first rtoken's leading byte
// is the number of rtokens after it (0..2) and its rkey/VA are valid on
// the link the message is sent on; the others carry the link ID they are
// valid on. The response echoes the request.
type ConfirmRKey []byte

const (
	confirmRKeyTokens   = 4
	confirmRKeyMaxExtra = 2
)

// NumRTokens returns how many rtokens the message carries (1..3).
func (m ConfirmRKey) NumRTokens() int { return 1 + int(m[confirmRKeyTokens]) }

// RToken returns rtoken i (0 <= i < NumRTokens); entry 0 has LinkID 0.
func (m ConfirmRKey) RToken(i int) RToken {
	if i < 0 || i >= m.NumRTokens() {
		return RToken{}
	}
	t := rtokenAt(m[confirmRKeyTokens+rtokenLen*i:])
	if i == 0 {
		t.LinkID = 0 // the byte is the count
	}
	return t
}

// Negative reports the 'negative response' flag (0x20).
func (m ConfirmRKey) Negative() bool { return LLCFlags(m[3])&LLCFlagRKeyNegative != 0 }

// Retry reports the 'retry rkey set' flag (0x10).
func (m ConfirmRKey) Retry() bool { return LLCFlags(m[3])&LLCFlagRKeyRetry != 0 }

// ConfirmRKeyFields holds the rtokens of a CONFIRM RKEY: the sending link's
// own first, then up to two for other links.
type ConfirmRKeyFields struct {
	RTokens []RToken `json:"rtokens"`
}

// Fields copies the message's fields.
func (m ConfirmRKey) Fields() ConfirmRKeyFields {
	var f ConfirmRKeyFields
	for i := range m.NumRTokens() {
		f.RTokens = append(f.RTokens, m.RToken(i))
	}
	return f
}

// AppendConfirmRKey appends a 44-byte CONFIRM RKEY with up to three
// rtokens (f.RTokens[0].LinkID is replaced by the count).
func AppendConfirmRKey(b []byte, v2 bool, flags LLCFlags, f *ConfirmRKeyFields) []byte {
	b, m := startLLC(b, LLCConfirmRKey, v2, flags, LLCLen)
	k := min(len(f.RTokens), 1+confirmRKeyMaxExtra)
	for i := range k {
		putRToken(m[confirmRKeyTokens+rtokenLen*i:], f.RTokens[i])
	}
	m[confirmRKeyTokens] = byte(max(k-1, 0))
	return b
}

// CONFIRM RKEY CONTINUE (0x08, v1 only), after the header: number of
// rkeys (1), three rtokens (13 each). Linux never sends it; the count
// may announce more rkeys than one message holds, so only the first
// three are read.
type ConfirmRKeyCont []byte

const confirmRKeyContMax = 3

// NumRKeys returns the 'number of rkeys' field as sent.
func (m ConfirmRKeyCont) NumRKeys() int { return int(m[4]) }

// NumRTokens returns how many rtokens this message holds: NumRKeys, at most 3.
func (m ConfirmRKeyCont) NumRTokens() int { return min(m.NumRKeys(), confirmRKeyContMax) }

// RToken returns rtoken i (0 <= i < NumRTokens).
func (m ConfirmRKeyCont) RToken(i int) RToken {
	if i < 0 || i >= m.NumRTokens() {
		return RToken{}
	}
	return rtokenAt(m[5+rtokenLen*i:])
}

// Negative reports the 'negative response' flag (0x20).
func (m ConfirmRKeyCont) Negative() bool { return LLCFlags(m[3])&LLCFlagRKeyNegative != 0 }

// ConfirmRKeyContFields holds the fields of a CONFIRM RKEY CONTINUE.
type ConfirmRKeyContFields struct {
	NumRKeys uint8    `json:"num_rkeys"`
	RTokens  []RToken `json:"rtokens,omitempty"`
}

// Fields copies the message's fields.
func (m ConfirmRKeyCont) Fields() ConfirmRKeyContFields {
	f := ConfirmRKeyContFields{NumRKeys: uint8(m.NumRKeys())}
	for i := range m.NumRTokens() {
		f.RTokens = append(f.RTokens, m.RToken(i))
	}
	return f
}

// AppendConfirmRKeyCont appends a 44-byte CONFIRM RKEY CONTINUE with the
// first three of f.RTokens.
func AppendConfirmRKeyCont(b []byte, flags LLCFlags, f *ConfirmRKeyContFields) []byte {
	b, m := startLLC(b, LLCConfirmRKeyCont, false, flags, LLCLen)
	m[4] = f.NumRKeys
	for i := range min(len(f.RTokens), confirmRKeyContMax) {
		putRToken(m[5+rtokenLen*i:], f.RTokens[i])
	}
	return b
}

// TEST LINK (0x07 / 0x27), after the header: user data (16), reserved
// (24). The response echoes the user data.
type TestLink []byte

// UserData returns the 16 bytes of 'user data'.
func (m TestLink) UserData() [16]byte { return [16]byte(m[4:]) }

// TestLinkFields holds the fields of a TEST LINK.
type TestLinkFields struct {
	UserData [16]byte `json:"user_data"`
}

// Fields copies the message's fields.
func (m TestLink) Fields() TestLinkFields { return TestLinkFields{m.UserData()} }

// AppendTestLink appends a 44-byte TEST LINK.
func AppendTestLink(b []byte, v2 bool, flags LLCFlags, f *TestLinkFields) []byte {
	b, m := startLLC(b, LLCTestLink, v2, flags, LLCLen)
	copy(m[4:], f.UserData[:])
	return b
}

// DELETE RKEY, after the header: number of rkeys (1), a status byte (1),
// reserved (2), rkeys (4 each). v1 (0x09) is 44 bytes with eight rkey
// slots and a trailing 4 reserved; the status byte is an error mask (bit
// 7-i set when rkey i failed). v2 (0x29) has as many rkeys as the length
// holds (Linux still sends 44 bytes) and the status byte counts the
// rkeys that failed. Linux's response keeps the count and zeroes the
// rkeys.
type DeleteRKey []byte

const (
	deleteRKeyKeys  = 8
	deleteRKeyMaxV1 = 8
)

// NumRKeys returns the 'number of rkeys'.
func (m DeleteRKey) NumRKeys() int { return int(m[4]) }

// ErrorMask returns the status byte of a v1 response: bit 7-i set when rkey i failed.
func (m DeleteRKey) ErrorMask() uint8 { return m[5] }

// NumInvalid returns the status byte of a v2 response: how many rkeys failed.
func (m DeleteRKey) NumInvalid() uint8 { return m[5] }

// RKey returns rkey i (0 <= i < NumRKeys).
func (m DeleteRKey) RKey(i int) uint32 {
	if i < 0 || i >= m.NumRKeys() {
		return 0
	}
	return binary.BigEndian.Uint32(m[deleteRKeyKeys+4*i:])
}

// Negative reports the 'negative response' flag (0x20).
func (m DeleteRKey) Negative() bool { return LLCFlags(m[3])&LLCFlagRKeyNegative != 0 }

// DeleteRKeyFields holds the fields of a DELETE RKEY.
type DeleteRKeyFields struct {
	Status uint8    `json:"status"` // v1: error mask; v2: number of invalid rkeys
	RKeys  []uint32 `json:"rkeys,omitempty"`
}

// Fields copies the message's fields.
func (m DeleteRKey) Fields() DeleteRKeyFields {
	f := DeleteRKeyFields{Status: m[5]}
	for i := range m.NumRKeys() {
		f.RKeys = append(f.RKeys, m.RKey(i))
	}
	return f
}

// AppendDeleteRKey appends a DELETE RKEY: 44 bytes with up to 8 rkeys for
// v1; for v2 44 bytes or as many as the rkeys need.
func AppendDeleteRKey(b []byte, v2 bool, flags LLCFlags, f *DeleteRKeyFields) []byte {
	k := min(len(f.RKeys), 255)
	if !v2 {
		k = min(k, deleteRKeyMaxV1)
	}
	b, m := startLLC(b, LLCDeleteRKey, v2, flags, max(LLCLen, deleteRKeyKeys+4*k))
	m[4], m[5] = byte(k), f.Status
	for i := range k {
		binary.BigEndian.PutUint32(m[deleteRKeyKeys+4*i:], f.RKeys[i])
	}
	return b
}
