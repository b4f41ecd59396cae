package smcwire

import (
	"encoding/binary"
	"fmt"
)

// CONFIRM LINK (0x01 / 0x21), after the header: sender MAC (6), sender GID
// (16), sender QPN (3), link number (1), link user ID (4), max links (1),
// max conns (1, SMC-Rv2.1; reserved before), reserved (8).
type ConfirmLink []byte

// SenderMAC returns the 'sender MAC'.
func (m ConfirmLink) SenderMAC() MAC { return MAC(m[4:]) }

// SenderGID returns the 'sender GID'.
func (m ConfirmLink) SenderGID() GID { return GID(m[10:]) }

// SenderQPN returns the 24-bit 'sender QP number'.
func (m ConfirmLink) SenderQPN() uint32 { return be24(m[26:]) }

// LinkNum returns the 'link number' (link ID).
func (m ConfirmLink) LinkNum() uint8 { return m[29] }

// LinkUserID returns the 4-byte 'link user ID'.
func (m ConfirmLink) LinkUserID() uint32 { return binary.BigEndian.Uint32(m[30:]) }

// MaxLinks returns 'max links' per link group.
func (m ConfirmLink) MaxLinks() uint8 { return m[34] }

// MaxConns returns 'max conns' per link group (SMC-Rv2.1).
func (m ConfirmLink) MaxConns() uint8 { return m[35] }

// NoRMBEEyecatcher reports the 0x03 flag bits: RMBEs carry no eyecatcher.
func (m ConfirmLink) NoRMBEEyecatcher() bool {
	return LLCFlags(m[3])&LLCFlagNoRMBEEyecatcher == LLCFlagNoRMBEEyecatcher
}

// ConfirmLinkFields holds the fields of a CONFIRM LINK.
type ConfirmLinkFields struct {
	SenderMAC  MAC    `json:"sender_mac"`
	SenderGID  GID    `json:"sender_gid"`
	SenderQPN  uint32 `json:"sender_qpn"`
	LinkNum    uint8  `json:"link_num"`
	LinkUserID uint32 `json:"link_user_id"`
	MaxLinks   uint8  `json:"max_links"`
	MaxConns   uint8  `json:"max_conns"`
}

// Fields copies the message's fields.
func (m ConfirmLink) Fields() ConfirmLinkFields {
	return ConfirmLinkFields{m.SenderMAC(), m.SenderGID(), m.SenderQPN(), m.LinkNum(), m.LinkUserID(), m.MaxLinks(), m.MaxConns()}
}

// AppendConfirmLink appends a 44-byte CONFIRM LINK. Linux sets flags
// LLCFlagNoRMBEEyecatcher (plus LLCFlagResponse in the response).
func AppendConfirmLink(b []byte, v2 bool, flags LLCFlags, f *ConfirmLinkFields) []byte {
	b, m := startLLC(b, LLCConfirmLink, v2, flags, LLCLen)
	copy(m[4:], f.SenderMAC[:])
	copy(m[10:], f.SenderGID[:])
	putBE24(m[26:], f.SenderQPN)
	m[29] = f.LinkNum
	binary.BigEndian.PutUint32(m[30:], f.LinkUserID)
	m[34], m[35] = f.MaxLinks, f.MaxConns
	return b
}

// ADD LINK (0x02 / 0x22), after the header: sender MAC (6), reserved (2),
// sender GID (16), sender QPN (3), link number (1), QP MTU (low nibble of
// 1 byte), initial PSN (3), reserved (8). A v2 request longer than 44
// bytes carries the v2 extension at byte 44: flags (1, 0x80 v2 direct),
// reserved (1), client target GID (16), reserved (8), rkey count (2,
// host order like the length, see LLC), then per RMB {rkey on the
// existing link (4), rkey on the new link (4), VA on the new link (8)}.
type AddLink []byte

const (
	addLinkExt          = LLCLen
	addLinkExtRKeys     = addLinkExt + 28
	addLinkRKeyLen      = 16
	addLinkExtDirect    = 0x80
	addLinkContMaxRKeys = 2
)

// SenderMAC returns the 'sender MAC'.
func (m AddLink) SenderMAC() MAC { return MAC(m[4:]) }

// SenderGID returns the 'sender GID'.
func (m AddLink) SenderGID() GID { return GID(m[12:]) }

// SenderQPN returns the 24-bit 'sender QP number' of the new link.
func (m AddLink) SenderQPN() uint32 { return be24(m[28:]) }

// LinkNum returns the 'link number' of the new link.
func (m AddLink) LinkNum() uint8 { return m[31] }

// QPMTU returns the 'QP MTU' enum (low nibble of byte 32).
func (m AddLink) QPMTU() QPMTU { return QPMTU(m[32] & 0x0F) }

// InitialPSN returns the 24-bit 'initial PSN' of the new link.
func (m AddLink) InitialPSN() uint32 { return be24(m[33:]) }

// Rejected reports the 'rejected' flag of a response (0x40).
func (m AddLink) Rejected() bool { return LLCFlags(m[3])&LLCFlagAddLinkReject != 0 }

// RejectReason returns the 'reject reason' (low nibble of byte 2; 1 = no
// alternate path). Only v1 has it: in v2 byte 2 is part of the length.
func (m AddLink) RejectReason() uint8 {
	if LLC(m).Version() != 1 {
		return 0
	}
	return m[2] & 0x0F
}

// HasV2Ext reports whether the v2 extension is present (v2 message longer than 44 bytes).
func (m AddLink) HasV2Ext() bool { return LLC(m).Version() == 2 && len(m) >= addLinkExtRKeys }

// V2Direct returns the extension's 'v2 direct' bit.
func (m AddLink) V2Direct() bool { return m.HasV2Ext() && m[addLinkExt]&addLinkExtDirect != 0 }

// ClientTargetGID returns the extension's 'client target GID'.
func (m AddLink) ClientTargetGID() GID {
	if !m.HasV2Ext() {
		return GID{}
	}
	return GID(m[addLinkExt+2:])
}

// NumRKeys returns the extension's rkey count.
func (m AddLink) NumRKeys() int {
	if !m.HasV2Ext() {
		return 0
	}
	n, _ := addLinkNumRKeys(m)
	return n
}

// RKey returns rkey entry i (0 <= i < NumRKeys) of the extension.
func (m AddLink) RKey(i int) RKeyPair {
	if i < 0 || i >= m.NumRKeys() {
		return RKeyPair{}
	}
	return rkeyPairAt(m[addLinkExtRKeys+addLinkRKeyLen*i:])
}

// addLinkNumRKeys decodes the 16-bit rkey count of an ADD LINK v2
// extension, which Linux writes in host byte order: the reading (little
// endian first) that fills the message exactly wins, else one that fits.
func addLinkNumRKeys(m []byte) (int, bool) {
	avail := (len(m) - addLinkExtRKeys) / addLinkRKeyLen
	le := int(binary.LittleEndian.Uint16(m[addLinkExtRKeys-2:]))
	be := int(binary.BigEndian.Uint16(m[addLinkExtRKeys-2:]))
	switch {
	case le == avail:
		return le, true
	case be == avail:
		return be, true
	case le < avail:
		return le, true
	case be < avail:
		return be, true
	}
	return 0, false
}

// RKeyPair is one RMB of an ADD LINK (CONTINUE): its rkey on the existing
// link and its rkey and virtual address on the new link.
type RKeyPair struct {
	RKey    uint32 `json:"rkey"`     // 'rkey' on the existing link
	RKeyNew uint32 `json:"rkey_new"` // 'rkey' on the new link
	VANew   uint64 `json:"va_new"`   // 'virtual address' on the new link
}

func rkeyPairAt(b []byte) RKeyPair {
	return RKeyPair{binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint64(b[8:])}
}

func putRKeyPair(b []byte, p RKeyPair) {
	binary.BigEndian.PutUint32(b, p.RKey)
	binary.BigEndian.PutUint32(b[4:], p.RKeyNew)
	binary.BigEndian.PutUint64(b[8:], p.VANew)
}

// AddLinkFields holds the fields of an ADD LINK.
type AddLinkFields struct {
	SenderMAC    MAC           `json:"sender_mac"`
	SenderGID    GID           `json:"sender_gid"`
	SenderQPN    uint32        `json:"sender_qpn"`
	LinkNum      uint8         `json:"link_num"`
	QPMTU        QPMTU         `json:"qp_mtu"`
	InitialPSN   uint32        `json:"initial_psn"`
	RejectReason uint8         `json:"reject_reason,omitempty"` // v1 only
	V2Ext        *AddLinkV2Ext `json:"v2_ext,omitempty"`
}

// AddLinkV2Ext is the v2 extension of an ADD LINK request.
type AddLinkV2Ext struct {
	V2Direct        bool       `json:"v2_direct"`
	ClientTargetGID GID        `json:"client_target_gid"`
	RKeys           []RKeyPair `json:"rkeys,omitempty"`
}

// Fields copies the message's fields.
func (m AddLink) Fields() AddLinkFields {
	f := AddLinkFields{m.SenderMAC(), m.SenderGID(), m.SenderQPN(), m.LinkNum(), m.QPMTU(), m.InitialPSN(), m.RejectReason(), nil}
	if m.HasV2Ext() {
		e := &AddLinkV2Ext{V2Direct: m.V2Direct(), ClientTargetGID: m.ClientTargetGID()}
		for i := range m.NumRKeys() {
			e.RKeys = append(e.RKeys, m.RKey(i))
		}
		f.V2Ext = e
	}
	return f
}

// AppendAddLink appends an ADD LINK: 44 bytes, plus for v2 with f.V2Ext
// set the extension (rkey count little endian, as Linux/x86 writes it).
// A v1 response that rejects sets LLCFlagAddLinkReject and RejectReason.
func AppendAddLink(b []byte, v2 bool, flags LLCFlags, f *AddLinkFields) []byte {
	n := LLCLen
	e := f.V2Ext
	if !v2 {
		e = nil
	}
	if e != nil {
		n = addLinkExtRKeys + addLinkRKeyLen*len(e.RKeys)
	}
	b, m := startLLC(b, LLCAddLink, v2, flags, n)
	if !v2 {
		m[2] = f.RejectReason & 0x0F
	}
	copy(m[4:], f.SenderMAC[:])
	copy(m[12:], f.SenderGID[:])
	putBE24(m[28:], f.SenderQPN)
	m[31] = f.LinkNum
	m[32] = byte(f.QPMTU & 0x0F)
	putBE24(m[33:], f.InitialPSN)
	if e == nil {
		return b
	}
	if e.V2Direct {
		m[addLinkExt] = addLinkExtDirect
	}
	copy(m[addLinkExt+2:], e.ClientTargetGID[:])
	binary.LittleEndian.PutUint16(m[addLinkExtRKeys-2:], uint16(len(e.RKeys)))
	for i, p := range e.RKeys {
		putRKeyPair(m[addLinkExtRKeys+addLinkRKeyLen*i:], p)
	}
	return b
}

// ADD LINK CONTINUE (0x03, v1 only), after the header: link number (1),
// number of rkeys (1), reserved (2), two RKeyPair slots (16 each),
// reserved (4). The number is what the sender has left to send, this
// message's included, as Linux counts (smc_llc_add_link_cont): it may be
// more than the two a message holds.
type AddLinkCont []byte

// LinkNum returns the 'link number'.
func (m AddLinkCont) LinkNum() uint8 { return m[4] }

// NumRKeys returns the 'number of rkeys': those left to send, this
// message's included.
func (m AddLinkCont) NumRKeys() int { return int(m[5]) }

// NumEntries returns how many rkey pairs this message holds: NumRKeys, at
// most 2.
func (m AddLinkCont) NumEntries() int { return min(m.NumRKeys(), addLinkContMaxRKeys) }

// RKey returns slot i (0 <= i < NumEntries).
func (m AddLinkCont) RKey(i int) RKeyPair {
	if i < 0 || i >= m.NumEntries() {
		return RKeyPair{}
	}
	return rkeyPairAt(m[8+addLinkRKeyLen*i:])
}

// AddLinkContFields holds the fields of an ADD LINK CONTINUE.
type AddLinkContFields struct {
	LinkNum uint8 `json:"link_num"`
	// NumRKeys is the count as sent (0: as many as RKeys).
	NumRKeys uint8      `json:"num_rkeys,omitempty"`
	RKeys    []RKeyPair `json:"rkeys,omitempty"` // at most 2
}

// Fields copies the message's fields.
func (m AddLinkCont) Fields() AddLinkContFields {
	f := AddLinkContFields{LinkNum: m.LinkNum(), NumRKeys: uint8(m.NumRKeys())}
	for i := range m.NumEntries() {
		f.RKeys = append(f.RKeys, m.RKey(i))
	}
	return f
}

// AppendAddLinkCont appends a 44-byte ADD LINK CONTINUE (RKeys beyond 2
// are dropped); its count is f.NumRKeys, or at least the pairs it holds.
func AppendAddLinkCont(b []byte, flags LLCFlags, f *AddLinkContFields) []byte {
	b, m := startLLC(b, LLCAddLinkCont, false, flags, LLCLen)
	m[4] = f.LinkNum
	k := min(len(f.RKeys), addLinkContMaxRKeys)
	m[5] = byte(max(int(f.NumRKeys), k))
	for i := range k {
		putRKeyPair(m[8+addLinkRKeyLen*i:], f.RKeys[i])
	}
	return b
}

// DELETE LINK (0x04 / 0x24), after the header: link number (1; 0 with
// the "all" flag), reason code (4), reserved (35).
type DeleteLink []byte

// LinkNum returns the 'link number' to delete (0 when All).
func (m DeleteLink) LinkNum() uint8 { return m[4] }

// Reason returns the 'reason code'.
func (m DeleteLink) Reason() DeleteLinkReason {
	return DeleteLinkReason(binary.BigEndian.Uint32(m[5:]))
}

// All reports the 'all links' flag (0x40): the whole link group goes.
func (m DeleteLink) All() bool { return LLCFlags(m[3])&LLCFlagDeleteAll != 0 }

// Orderly reports the 'orderly' flag (0x20).
func (m DeleteLink) Orderly() bool { return LLCFlags(m[3])&LLCFlagDeleteOrderly != 0 }

// DeleteLinkFields holds the fields of a DELETE LINK (All and Orderly are flags).
type DeleteLinkFields struct {
	LinkNum uint8            `json:"link_num"`
	Reason  DeleteLinkReason `json:"reason"`
}

// Fields copies the message's fields.
func (m DeleteLink) Fields() DeleteLinkFields { return DeleteLinkFields{m.LinkNum(), m.Reason()} }

// AppendDeleteLink appends a 44-byte DELETE LINK.
func AppendDeleteLink(b []byte, v2 bool, flags LLCFlags, f *DeleteLinkFields) []byte {
	b, m := startLLC(b, LLCDeleteLink, v2, flags, LLCLen)
	m[4] = f.LinkNum
	binary.BigEndian.PutUint32(m[5:], uint32(f.Reason))
	return b
}

// DeleteLinkReason is the DELETE LINK 'reason code'.
type DeleteLinkReason uint32

// DELETE LINK reason codes (Linux SMC_LLC_DEL_*).
const (
	DelLostPath     DeleteLinkReason = 0x00010000
	DelOpInitTerm   DeleteLinkReason = 0x00020000
	DelProgInitTerm DeleteLinkReason = 0x00030000
	DelProtViol     DeleteLinkReason = 0x00040000
	DelNoAsymNeeded DeleteLinkReason = 0x00050000
	DelNoLink       DeleteLinkReason = 0x00100000 // response: unknown link ID
	DelNoLinkGroup  DeleteLinkReason = 0x00200000 // response: unknown link group
)

// Name returns e.g. "OP_INIT_TERM", or "" for an unknown code.
func (r DeleteLinkReason) Name() string {
	switch r {
	case DelLostPath:
		return "LOST_PATH"
	case DelOpInitTerm:
		return "OP_INIT_TERM"
	case DelProgInitTerm:
		return "PROG_INIT_TERM"
	case DelProtViol:
		return "PROT_VIOL"
	case DelNoAsymNeeded:
		return "NO_ASYM_NEEDED"
	case DelNoLink:
		return "NOLNK"
	case DelNoLinkGroup:
		return "NOLGR"
	}
	return ""
}

// String returns the name, or the code in hex.
func (r DeleteLinkReason) String() string {
	if n := r.Name(); n != "" {
		return n
	}
	return fmt.Sprintf("0x%08x", uint32(r))
}

// REQUEST ADD LINK (0x05 / 0x25), after the header: reserved (20), GID
// count (1), reserved (3), GIDs (16 each).
type RequestAddLink []byte

const (
	reqAddLinkCount = 24
	reqAddLinkGIDs  = 28
)

// NumGIDs returns the 'GID count'.
func (m RequestAddLink) NumGIDs() int { return int(m[reqAddLinkCount]) }

// GID returns GID i (0 <= i < NumGIDs).
func (m RequestAddLink) GID(i int) GID {
	if i < 0 || i >= m.NumGIDs() {
		return GID{}
	}
	return GID(m[reqAddLinkGIDs+16*i:])
}

// Rejected reports the 'rejected' flag of a response (0x40).
func (m RequestAddLink) Rejected() bool { return LLCFlags(m[3])&LLCFlagAddLinkReject != 0 }

// RequestAddLinkFields holds the fields of a REQUEST ADD LINK.
type RequestAddLinkFields struct {
	GIDs []GID `json:"gids,omitempty"`
}

// Fields copies the message's fields.
func (m RequestAddLink) Fields() RequestAddLinkFields {
	var f RequestAddLinkFields
	for i := range m.NumGIDs() {
		f.GIDs = append(f.GIDs, m.GID(i))
	}
	return f
}

// AppendRequestAddLink appends a REQUEST ADD LINK: at least 44 bytes; a v2
// message grows to hold every GID, a v1 one holds at most one.
func AppendRequestAddLink(b []byte, v2 bool, flags LLCFlags, f *RequestAddLinkFields) []byte {
	k := min(len(f.GIDs), 255)
	if !v2 {
		k = min(k, 1)
	}
	b, m := startLLC(b, LLCRequestAddLink, v2, flags, max(LLCLen, reqAddLinkGIDs+16*k))
	m[reqAddLinkCount] = byte(k)
	for i := range k {
		copy(m[reqAddLinkGIDs+16*i:], f.GIDs[i][:])
	}
	return b
}
