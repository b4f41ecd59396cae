package smcwire

import (
	"encoding/binary"
	"net/netip"
)

// CLC Proposal layout (type 1). The fixed part follows RFC 7609; SMCv2
// (and Linux since 5.11, which always sends version 2) inserts a 40-byte
// SMC-D info block after it and appends the v2 extension. Receivers must
// locate every area through the offsets, never by fixed positions: the IP
// area through 'IP area offset', the v2 extension through the offset in
// the SMC-D block, the SMC-Dv2 extension through the offset in the v2
// extension.
//
//	 8  sender peer ID (8)       16 preferred GID (16)      32 preferred MAC (6)
//	38  IP area offset (2): bytes from 40 to the IP area
//	40  SMC-D info (40): ISM GID (8), ISM CHID (2), v2 extension offset (2,
//	    counted from byte 52), vendor OUI (3), vendor options (5), reserved (20)
//	..  IP area: IPv4 subnet (4), prefix length (1), reserved (2),
//	    IPv6 prefix count n (1), n x {prefix (16), length (1)}
//	..  v2 extension: EID count (1), ISM GID count (1), reserved (1),
//	    release<<4 | SEID (1), reserved (2), SMC-Dv2 extension offset (2,
//	    counted from the end of this field), RoCEv2 GID (16), max conns (1),
//	    max links (1), feature mask (2), reserved (12), user EIDs (32 each)
//	..  SMC-Dv2 extension: system EID (32), reserved (16),
//	    ISM GID count x {ISM GID (8), CHID (2)}
//	..  trailer (4)
const (
	propPeerID      = 8
	propGID         = 16
	propMAC         = 32
	propIPAreaOff   = 38
	propFixedLen    = 40
	smcdInfoLen     = 40
	smcdV2ExtOffEnd = propFixedLen + 12 // v2 extension offset counts from here
	ipAreaLen       = 8
	ipv6PrefixLen   = 17
	v2ExtLen        = 40
	v2ExtDOffEnd    = 8 // SMC-Dv2 extension offset counts from here (within the v2 extension)
	eidLen          = 32
	smcdV2ExtLen    = 48
	ismGIDChidLen   = 10

	v2FlagSEID = 0x01 // v2 extension byte 3: release<<4 | SEID
)

// Proposal is a view of a CLC Proposal. Areas that are absent report
// false from their Has method; their accessors then return zero values.
type Proposal struct {
	CLC
	smcd, ip, v2, dv2 int // offsets of the areas, 0 when absent
}

// ParseProposal checks b as a CLC Proposal: the common header (ParseCLC),
// then that every area the header announces lies inside the message
// before the trailer, with all its entries.
func ParseProposal(b []byte) (Proposal, error) {
	c, err := ParseCLC(b)
	if err != nil {
		return Proposal{}, err
	}
	if c.Type() != CLCProposal {
		return Proposal{}, ErrType
	}
	end := len(c) - CLCTrailerLen
	if end < propFixedLen {
		return Proposal{}, ErrLength
	}
	p := Proposal{CLC: c}
	ipOff := int(binary.BigEndian.Uint16(c[propIPAreaOff:]))
	// Linux puts the SMC-D block first in every v2 proposal and in v1 ones
	// offering SMC-D (IP area offset 40); RFC 7609 peers send offset 0.
	if c.Version() >= 2 || ipOff >= smcdInfoLen {
		if end < propFixedLen+smcdInfoLen {
			return Proposal{}, ErrOffset
		}
		p.smcd = propFixedLen
	}
	if c.TypeV1() != TypeN {
		o := propFixedLen + ipOff
		if o+ipAreaLen > end {
			return Proposal{}, ErrOffset
		}
		if o+ipAreaLen+int(c[o+7])*ipv6PrefixLen > end {
			return Proposal{}, ErrCount
		}
		p.ip = o
	}
	if c.Version() >= 2 && c.TypeV2() != TypeN {
		if p.smcd == 0 {
			return Proposal{}, ErrOffset
		}
		o := smcdV2ExtOffEnd + int(binary.BigEndian.Uint16(c[p.smcd+10:]))
		if o+v2ExtLen > end {
			return Proposal{}, ErrOffset
		}
		if o+v2ExtLen+int(c[o])*eidLen > end {
			return Proposal{}, ErrCount
		}
		p.v2 = o
		if c.TypeV2().HasD() {
			o := p.v2 + v2ExtDOffEnd + int(binary.BigEndian.Uint16(c[p.v2+6:]))
			if o+smcdV2ExtLen > end {
				return Proposal{}, ErrOffset
			}
			if o+smcdV2ExtLen+int(c[p.v2+1])*ismGIDChidLen > end {
				return Proposal{}, ErrCount
			}
			p.dv2 = o
		}
	}
	return p, nil
}

// PeerID returns the 'sender peer ID'.
func (p Proposal) PeerID() PeerID { return PeerID(p.CLC[propPeerID:]) }

// GID returns the 'client preferred GID' (SMC-Rv1; zero in v2-only proposals).
func (p Proposal) GID() GID { return GID(p.CLC[propGID:]) }

// MAC returns the 'client preferred MAC'.
func (p Proposal) MAC() MAC { return MAC(p.CLC[propMAC:]) }

// IPAreaOffset returns the 'IP area offset' field: bytes between byte 40 and the IP area.
func (p Proposal) IPAreaOffset() uint16 { return binary.BigEndian.Uint16(p.CLC[propIPAreaOff:]) }

// HasSMCDInfo reports whether the 40-byte SMC-D info block is present.
func (p Proposal) HasSMCDInfo() bool { return p.smcd != 0 }

// ISMGID returns the SMC-D block's 'ISM GID'.
func (p Proposal) ISMGID() uint64 { return p.u64(p.smcd, 0) }

// ISMCHID returns the SMC-D block's 'ISM CHID'.
func (p Proposal) ISMCHID() uint16 { return p.u16(p.smcd, 8) }

// V2ExtOffset returns the SMC-D block's 'v2 extension offset' (from byte 52).
func (p Proposal) V2ExtOffset() uint16 { return p.u16(p.smcd, 10) }

// HasIPArea reports whether the IP area is present (TypeV1 is not none).
func (p Proposal) HasIPArea() bool { return p.ip != 0 }

// Subnet returns the IP area's IPv4 'outgoing subnet' (address & mask).
func (p Proposal) Subnet() netip.Addr {
	if p.ip == 0 {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte(p.CLC[p.ip:]))
}

// PrefixLen returns the IP area's IPv4 'prefix length'.
func (p Proposal) PrefixLen() uint8 { return p.u8(p.ip, 4) }

// NumIPv6Prefixes returns the IP area's 'IPv6 prefix count'.
func (p Proposal) NumIPv6Prefixes() int { return int(p.u8(p.ip, 7)) }

// IPv6Prefix returns entry i (0 <= i < NumIPv6Prefixes) of the IPv6 prefix array.
func (p Proposal) IPv6Prefix(i int) IPv6Prefix {
	if i < 0 || i >= p.NumIPv6Prefixes() {
		return IPv6Prefix{}
	}
	o := p.ip + ipAreaLen + i*ipv6PrefixLen
	return IPv6Prefix{Addr: netip.AddrFrom16([16]byte(p.CLC[o:])), Len: p.CLC[o+16]}
}

// HasV2Ext reports whether the v2 extension is present (version 2 and TypeV2 not none).
func (p Proposal) HasV2Ext() bool { return p.v2 != 0 }

// NumUserEIDs returns the v2 extension's 'EID count'.
func (p Proposal) NumUserEIDs() int { return int(p.u8(p.v2, 0)) }

// NumISMGIDs returns the v2 extension's 'ISMv2 GID count' (entries of the SMC-Dv2 extension).
func (p Proposal) NumISMGIDs() int { return int(p.u8(p.v2, 1)) }

// Release returns the v2 extension's 'release' (bits 7-4 of byte 3): 0 = SMCv2.0, 1 = SMCv2.1.
func (p Proposal) Release() uint8 { return p.u8(p.v2, 3) >> 4 }

// SEID reports the v2 extension's 'SEID' bit (bit 0 of byte 3): a system EID is present.
func (p Proposal) SEID() bool { return p.u8(p.v2, 3)&v2FlagSEID != 0 }

// SMCDv2ExtOffset returns the v2 extension's 'SMC-Dv2 extension offset'.
func (p Proposal) SMCDv2ExtOffset() uint16 { return p.u16(p.v2, 6) }

// RoCEGID returns the v2 extension's 'RoCEv2 GID' for SMC-Rv2.
func (p Proposal) RoCEGID() GID {
	if p.v2 == 0 {
		return GID{}
	}
	return GID(p.CLC[p.v2+8:])
}

// MaxConns returns the v2 extension's 'max connections per link group' (release >= 1).
func (p Proposal) MaxConns() uint8 { return p.u8(p.v2, 24) }

// MaxLinks returns the v2 extension's 'max links per link group' (release >= 1).
func (p Proposal) MaxLinks() uint8 { return p.u8(p.v2, 25) }

// FeatureMask returns the v2 extension's 'feature mask' (release >= 1).
func (p Proposal) FeatureMask() uint16 { return p.u16(p.v2, 26) }

// UserEID returns user EID i (0 <= i < NumUserEIDs).
func (p Proposal) UserEID(i int) EID {
	if i < 0 || i >= p.NumUserEIDs() {
		return EID{}
	}
	return EID(p.CLC[p.v2+v2ExtLen+i*eidLen:])
}

// HasSMCDv2Ext reports whether the SMC-Dv2 extension is present (TypeV2 includes SMC-D).
func (p Proposal) HasSMCDv2Ext() bool { return p.dv2 != 0 }

// SystemEID returns the SMC-Dv2 extension's 'system EID'.
func (p Proposal) SystemEID() EID {
	if p.dv2 == 0 {
		return EID{}
	}
	return EID(p.CLC[p.dv2:])
}

// ISMv2 returns ISM GID/CHID entry i (0 <= i < NumISMGIDs) of the SMC-Dv2 extension.
func (p Proposal) ISMv2(i int) ISMGIDCHID {
	if p.dv2 == 0 || i < 0 || i >= p.NumISMGIDs() {
		return ISMGIDCHID{}
	}
	o := p.dv2 + smcdV2ExtLen + i*ismGIDChidLen
	return ISMGIDCHID{GID: binary.BigEndian.Uint64(p.CLC[o:]), CHID: binary.BigEndian.Uint16(p.CLC[o+8:])}
}

// u8, u16 and u64 read at area+off, or return 0 for an absent area (offset 0).
func (p Proposal) u8(area, off int) uint8 {
	if area == 0 {
		return 0
	}
	return p.CLC[area+off]
}

func (p Proposal) u16(area, off int) uint16 {
	if area == 0 {
		return 0
	}
	return binary.BigEndian.Uint16(p.CLC[area+off:])
}

func (p Proposal) u64(area, off int) uint64 {
	if area == 0 {
		return 0
	}
	return binary.BigEndian.Uint64(p.CLC[area+off:])
}

// IPv6Prefix is one entry of the Proposal's IPv6 prefix array.
type IPv6Prefix struct {
	Addr netip.Addr `json:"prefix"` // 'IPv6 prefix'
	Len  uint8      `json:"len"`    // 'prefix length' in bits
}

// ISMGIDCHID is one entry of the SMC-Dv2 extension.
type ISMGIDCHID struct {
	GID  uint64 `json:"gid"`  // 'ISM GID'
	CHID uint16 `json:"chid"` // 'ISM CHID'
}

// ProposalFields holds every field of a CLC Proposal. A nil area is absent.
type ProposalFields struct {
	CLCHeader
	PeerID   PeerID         `json:"peer_id"`
	GID      GID            `json:"gid"`
	MAC      MAC            `json:"mac"`
	SMCDInfo *SMCDInfo      `json:"smcd_info,omitempty"`
	IPArea   *IPArea        `json:"ip_area,omitempty"`
	V2Ext    *ProposalV2Ext `json:"v2_ext,omitempty"`
	SMCDv2   *SMCDv2Ext     `json:"smcdv2_ext,omitempty"`
}

// SMCDInfo is the SMC-D info block of a Proposal (the offset fields are
// derived when encoding).
type SMCDInfo struct {
	ISMGID  uint64 `json:"ism_gid"`
	ISMCHID uint16 `json:"ism_chid"`
}

// IPArea is the Proposal's IP area.
type IPArea struct {
	Subnet       netip.Addr   `json:"subnet"`     // IPv4 outgoing subnet
	PrefixLen    uint8        `json:"prefix_len"` // significant bits of Subnet
	IPv6Prefixes []IPv6Prefix `json:"ipv6_prefixes,omitempty"`
}

// ProposalV2Ext is the Proposal's v2 extension.
type ProposalV2Ext struct {
	Release     uint8  `json:"release"`
	SEID        bool   `json:"seid"`
	RoCEGID     GID    `json:"roce_gid"`
	MaxConns    uint8  `json:"max_conns"`
	MaxLinks    uint8  `json:"max_links"`
	FeatureMask uint16 `json:"feature_mask"`
	UserEIDs    []EID  `json:"user_eids,omitempty"`
}

// SMCDv2Ext is the Proposal's SMC-Dv2 extension.
type SMCDv2Ext struct {
	SystemEID EID          `json:"system_eid"`
	ISMGIDs   []ISMGIDCHID `json:"ism_gids,omitempty"`
}

// Fields copies the Proposal into a ProposalFields (allocating for the lists).
func (p Proposal) Fields() ProposalFields {
	f := ProposalFields{CLCHeader: p.Header(), PeerID: p.PeerID(), GID: p.GID(), MAC: p.MAC()}
	if p.HasSMCDInfo() {
		f.SMCDInfo = &SMCDInfo{ISMGID: p.ISMGID(), ISMCHID: p.ISMCHID()}
	}
	if p.HasIPArea() {
		a := &IPArea{Subnet: p.Subnet(), PrefixLen: p.PrefixLen()}
		for i := range p.NumIPv6Prefixes() {
			a.IPv6Prefixes = append(a.IPv6Prefixes, p.IPv6Prefix(i))
		}
		f.IPArea = a
	}
	if p.HasV2Ext() {
		v := &ProposalV2Ext{Release: p.Release(), SEID: p.SEID(), RoCEGID: p.RoCEGID(),
			MaxConns: p.MaxConns(), MaxLinks: p.MaxLinks(), FeatureMask: p.FeatureMask()}
		for i := range p.NumUserEIDs() {
			v.UserEIDs = append(v.UserEIDs, p.UserEID(i))
		}
		f.V2Ext = v
	}
	if p.HasSMCDv2Ext() {
		d := &SMCDv2Ext{SystemEID: p.SystemEID()}
		for i := range p.NumISMGIDs() {
			d.ISMGIDs = append(d.ISMGIDs, p.ISMv2(i))
		}
		f.SMCDv2 = d
	}
	return f
}

// AppendProposal encodes f as a CLC Proposal appended to b, laid out as
// Linux lays it out: the SMC-D block whenever the version is 2 (or SMCDInfo
// is set), directly followed by the IP area (if IPArea is set; IP area
// offset 40 after an SMC-D block, else 0), the v2 extension (if V2Ext is
// set) and the SMC-Dv2 extension (if SMCDv2 is set), every offset pointing
// at the next byte. f.TypeV1/TypeV2 are written as given; ParseProposal
// only finds the areas they announce, so keep them consistent (TypeV1 not
// none iff IPArea, TypeV2 not none iff V2Ext, TypeV2 with SMC-D iff SMCDv2).
func AppendProposal(b []byte, f *ProposalFields) []byte {
	b, start := startCLC(b, CLCProposal, f.CLCHeader)
	b, m := grow(b, propFixedLen-CLCHeaderLen)
	copy(m[propPeerID-8:], f.PeerID[:])
	copy(m[propGID-8:], f.GID[:])
	copy(m[propMAC-8:], f.MAC[:])
	smcd := -1
	if f.Version >= 2 || f.SMCDInfo != nil {
		smcd = len(b)
		var blk []byte
		b, blk = grow(b, smcdInfoLen)
		if f.SMCDInfo != nil {
			binary.BigEndian.PutUint64(blk, f.SMCDInfo.ISMGID)
			binary.BigEndian.PutUint16(blk[8:], f.SMCDInfo.ISMCHID)
		}
	}
	// The IP area offset skips the SMC-D block when there is an IP area to
	// find; a v1 proposal also needs it to announce the block at all.
	if smcd >= 0 && (f.IPArea != nil || f.Version < 2) {
		binary.BigEndian.PutUint16(b[start+propIPAreaOff:], smcdInfoLen)
	}
	if a := f.IPArea; a != nil {
		var ip4 [4]byte
		if a.Subnet.Is4() {
			ip4 = a.Subnet.As4()
		}
		b = append(b, ip4[:]...)
		b = append(b, a.PrefixLen, 0, 0, byte(len(a.IPv6Prefixes)))
		for _, pr := range a.IPv6Prefixes {
			var ip6 [16]byte
			if pr.Addr.IsValid() {
				ip6 = pr.Addr.As16()
			}
			b = append(b, ip6[:]...)
			b = append(b, pr.Len)
		}
	}
	if v := f.V2Ext; v != nil {
		v2 := len(b)
		if smcd >= 0 {
			binary.BigEndian.PutUint16(b[smcd+10:], uint16(v2-start-smcdV2ExtOffEnd))
		}
		var ext []byte
		b, ext = grow(b, v2ExtLen)
		ext[0] = byte(len(v.UserEIDs))
		if f.SMCDv2 != nil {
			ext[1] = byte(len(f.SMCDv2.ISMGIDs))
		}
		ext[3] = v.Release << 4
		if v.SEID {
			ext[3] |= v2FlagSEID
		}
		copy(ext[8:], v.RoCEGID[:])
		ext[24], ext[25] = v.MaxConns, v.MaxLinks
		binary.BigEndian.PutUint16(ext[26:], v.FeatureMask)
		for _, e := range v.UserEIDs {
			b = append(b, e[:]...)
		}
		if d := f.SMCDv2; d != nil {
			binary.BigEndian.PutUint16(b[v2+6:], uint16(len(b)-v2-v2ExtDOffEnd))
			b = append(b, d.SystemEID[:]...)
			b, _ = grow(b, smcdV2ExtLen-eidLen)
			for _, g := range d.ISMGIDs {
				b = binary.BigEndian.AppendUint64(b, g.GID)
				b = binary.BigEndian.AppendUint16(b, g.CHID)
			}
		}
	}
	return finishCLC(b, start)
}
