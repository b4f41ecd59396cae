package smcwire

import "encoding/binary"

// CLC Accept (type 2, server) and Confirm (type 3, client) for SMC-R. Both
// share one layout; byte 50 packs two 4-bit fields, RMBE size in the high
// nibble and QP MTU in the low one (the Linux bitfield lists them the other
// way round on little-endian hosts).
//
//	 8 sender peer ID (8)   16 sender GID (16)   32 sender MAC (6)
//	38 QP number (3)        41 RMB rkey (4)      45 RMBE index (1)
//	46 RMBE alert token (4) 50 RMBE size<<4 | QP MTU (1)   51 reserved (1)
//	52 RMB virtual address (8)   60 reserved (1)   61 initial PSN (3)
//	64 v1: trailer (68 bytes in all)
//	64 v2: EID (32), reserved (8)                    -> 108 with trailer
//	104 v2 first contact: first-contact extension (52): flags (1, 0x80 v2
//	    direct), OS type<<4 | release (1), reserved (2), hostname (32),
//	    max conns (1), max links (1), feature mask (2), vendor options (4),
//	    reserved (8)                                -> 160 with trailer
//	156 v2 first-contact Confirm: GID count (1), reserved (3), GIDs (16 each)
//
// The captures of Linux 6.1 (SMCv2.0) and 6.12 (SMCv2.1) both send the
// first-contact extension as 52 bytes; 6.1 leaves the last 16 zero, 6.12
// puts max conns/links and the feature mask there (release 1).
const (
	acPeerID       = 8
	acGID          = 16
	acMAC          = 32
	acQPN          = 38
	acRKey         = 41
	acRMBEIdx      = 45
	acToken        = 46
	acSizeMTU      = 50
	acVA           = 52
	acPSN          = 61
	acV1Len        = 64 // fixed part, before the trailer (v1) or the v2 fields
	acEID          = 64
	acV2Len        = 104
	acFCE          = 104
	fceLen         = 52
	acGIDList      = acFCE + fceLen
	gidListHdrLen  = 4
	fceFlagDirect  = 0x80
	AcceptV1Len    = acV1Len + CLCTrailerLen // SMC-R v1 Accept/Confirm: 68 bytes
	AcceptV2MinLen = acV2Len + CLCTrailerLen // SMC-R v2 without first contact: 108 bytes
)

// AcceptConfirm is a view of an SMC-R CLC Accept or Confirm.
type AcceptConfirm struct{ CLC }

// ParseAcceptConfirm checks b as an SMC-R CLC Accept or Confirm: the
// common header, then room for the v1 fields, for v2 the EID, with the
// first-contact flag the first-contact extension, and in a first-contact
// v2 Confirm the GID list with all its entries. SMC-D Accept/Confirm
// (TypeV1 SMC-D) return ErrUnsupported.
func ParseAcceptConfirm(b []byte) (AcceptConfirm, error) {
	c, err := ParseCLC(b)
	if err != nil {
		return AcceptConfirm{}, err
	}
	if c.Type() != CLCAccept && c.Type() != CLCConfirm {
		return AcceptConfirm{}, ErrType
	}
	switch c.TypeV1() {
	case TypeR:
	case TypeD:
		return AcceptConfirm{}, ErrUnsupported
	default:
		return AcceptConfirm{}, ErrType
	}
	end := len(c) - CLCTrailerLen
	need := acV1Len
	if c.Version() >= 2 {
		need = acV2Len
		if c.FirstContact() {
			need += fceLen
		}
	}
	if end < need {
		return AcceptConfirm{}, ErrLength
	}
	a := AcceptConfirm{c}
	if a.hasGIDList() {
		if end < acGIDList+gidListHdrLen {
			return AcceptConfirm{}, ErrLength
		}
		if acGIDList+gidListHdrLen+int(c[acGIDList])*16 > end {
			return AcceptConfirm{}, ErrCount
		}
	}
	return a, nil
}

func (a AcceptConfirm) isV2() bool { return a.Version() >= 2 }

// HasFirstContactExt reports whether the first-contact extension is present (v2, first contact).
func (a AcceptConfirm) HasFirstContactExt() bool { return a.isV2() && a.FirstContact() }

func (a AcceptConfirm) hasGIDList() bool {
	return a.HasFirstContactExt() && a.Type() == CLCConfirm
}

// PeerID returns the 'sender peer ID'.
func (a AcceptConfirm) PeerID() PeerID { return PeerID(a.CLC[acPeerID:]) }

// GID returns the 'sender GID' of the RoCE port used.
func (a AcceptConfirm) GID() GID { return GID(a.CLC[acGID:]) }

// MAC returns the 'sender MAC'.
func (a AcceptConfirm) MAC() MAC { return MAC(a.CLC[acMAC:]) }

// QPN returns the 24-bit 'QP number' of the sender's RC QP.
func (a AcceptConfirm) QPN() uint32 { return be24(a.CLC[acQPN:]) }

// RMBRKey returns the 'RMB rkey' the peer writes into.
func (a AcceptConfirm) RMBRKey() uint32 { return binary.BigEndian.Uint32(a.CLC[acRKey:]) }

// RMBEIndex returns the 'RMBE index' within the RMB (Linux: always 1).
func (a AcceptConfirm) RMBEIndex() uint8 { return a.CLC[acRMBEIdx] }

// AlertToken returns the 'RMBE alert token' the peer puts in its CDC messages.
func (a AcceptConfirm) AlertToken() uint32 { return binary.BigEndian.Uint32(a.CLC[acToken:]) }

// RMBESizeCode returns the compressed 'RMBE size' (high nibble of byte 50).
func (a AcceptConfirm) RMBESizeCode() uint8 { return a.CLC[acSizeMTU] >> 4 }

// RMBESize returns the RMBE size in bytes, 2^(code+14).
func (a AcceptConfirm) RMBESize() uint32 { return RMBESize(a.RMBESizeCode()) }

// QPMTU returns the 'QP MTU' enum (low nibble of byte 50).
func (a AcceptConfirm) QPMTU() QPMTU { return QPMTU(a.CLC[acSizeMTU] & 0x0F) }

// RMBVA returns the 'RMB virtual address' the peer uses as RDMA WRITE target.
func (a AcceptConfirm) RMBVA() uint64 { return binary.BigEndian.Uint64(a.CLC[acVA:]) }

// PSN returns the 24-bit 'initial PSN' of the sender's send queue.
func (a AcceptConfirm) PSN() uint32 { return be24(a.CLC[acPSN:]) }

// EID returns the negotiated 'EID' (v2; zero for v1).
func (a AcceptConfirm) EID() EID {
	if !a.isV2() {
		return EID{}
	}
	return EID(a.CLC[acEID:])
}

func (a AcceptConfirm) fce(off int) byte {
	if !a.HasFirstContactExt() {
		return 0
	}
	return a.CLC[acFCE+off]
}

// V2Direct returns the first-contact extension's 'v2 direct' bit: the
// peers share a subnet (no gateway).
func (a AcceptConfirm) V2Direct() bool { return a.fce(0)&fceFlagDirect != 0 }

// OSType returns the first-contact extension's 'OS type' (bits 7-4 of byte 1).
func (a AcceptConfirm) OSType() OSType { return OSType(a.fce(1) >> 4) }

// Release returns the first-contact extension's SMCv2 'release' (bits 3-0 of byte 1).
func (a AcceptConfirm) Release() uint8 { return a.fce(1) & 0x0F }

// Hostname returns the first-contact extension's 'hostname'.
func (a AcceptConfirm) Hostname() Hostname {
	if !a.HasFirstContactExt() {
		return Hostname{}
	}
	return Hostname(a.CLC[acFCE+4:])
}

// MaxConns returns the first-contact extension's 'max connections' (release >= 1).
func (a AcceptConfirm) MaxConns() uint8 { return a.fce(36) }

// MaxLinks returns the first-contact extension's 'max links' (release >= 1).
func (a AcceptConfirm) MaxLinks() uint8 { return a.fce(37) }

// FeatureMask returns the first-contact extension's 'feature mask' (release >= 1).
func (a AcceptConfirm) FeatureMask() uint16 {
	return uint16(a.fce(38))<<8 | uint16(a.fce(39))
}

// VendorOptions returns the first-contact extension's 'vendor options' (release >= 1).
func (a AcceptConfirm) VendorOptions() uint32 {
	if !a.HasFirstContactExt() {
		return 0
	}
	return binary.BigEndian.Uint32(a.CLC[acFCE+40:])
}

// NumGIDs returns the length of a first-contact v2 Confirm's GID list (else 0).
func (a AcceptConfirm) NumGIDs() int {
	if !a.hasGIDList() {
		return 0
	}
	return int(a.CLC[acGIDList])
}

// ListGID returns entry i (0 <= i < NumGIDs) of the GID list.
func (a AcceptConfirm) ListGID(i int) GID {
	if i < 0 || i >= a.NumGIDs() {
		return GID{}
	}
	return GID(a.CLC[acGIDList+gidListHdrLen+16*i:])
}

// OSType is the 4-bit operating system code of CLC first-contact
// extensions and Declines.
type OSType uint8

// OS types.
const (
	OSzOS     OSType = 1
	OSLinux   OSType = 2
	OSAIX     OSType = 3
	OSUnknown OSType = 15
)

func (o OSType) String() string {
	switch o {
	case 0:
		return ""
	case OSzOS:
		return "z/OS"
	case OSLinux:
		return "Linux"
	case OSAIX:
		return "AIX"
	}
	return "unknown"
}

// AcceptConfirmFields holds every field of an SMC-R Accept or Confirm.
type AcceptConfirmFields struct {
	CLCHeader
	Confirm         bool             `json:"confirm"` // type 3 (client) instead of 2 (server)
	PeerID          PeerID           `json:"peer_id"`
	GID             GID              `json:"gid"`
	MAC             MAC              `json:"mac"`
	QPN             uint32           `json:"qpn"`
	RMBRKey         uint32           `json:"rmb_rkey"`
	RMBEIndex       uint8            `json:"rmbe_index"`
	AlertToken      uint32           `json:"alert_token"`
	RMBESizeCode    uint8            `json:"rmbe_size_code"`
	QPMTU           QPMTU            `json:"qp_mtu"`
	RMBVA           uint64           `json:"rmb_va"`
	PSN             uint32           `json:"psn"`
	EID             EID              `json:"eid"` // v2 (zero in v1)
	FirstContactExt *FirstContactExt `json:"first_contact_ext,omitempty"`
	GIDs            []GID            `json:"gids,omitempty"` // v2 first-contact Confirm
}

// FirstContactExt is the v2 first-contact extension.
type FirstContactExt struct {
	V2Direct      bool     `json:"v2_direct"`
	OSType        OSType   `json:"os_type"`
	Release       uint8    `json:"release"`
	Hostname      Hostname `json:"hostname"`
	MaxConns      uint8    `json:"max_conns"`
	MaxLinks      uint8    `json:"max_links"`
	FeatureMask   uint16   `json:"feature_mask"`
	VendorOptions uint32   `json:"vendor_options"`
}

// Fields copies the message into an AcceptConfirmFields.
func (a AcceptConfirm) Fields() AcceptConfirmFields {
	f := AcceptConfirmFields{
		CLCHeader: a.Header(), Confirm: a.Type() == CLCConfirm,
		PeerID: a.PeerID(), GID: a.GID(), MAC: a.MAC(), QPN: a.QPN(), RMBRKey: a.RMBRKey(),
		RMBEIndex: a.RMBEIndex(), AlertToken: a.AlertToken(), RMBESizeCode: a.RMBESizeCode(),
		QPMTU: a.QPMTU(), RMBVA: a.RMBVA(), PSN: a.PSN(), EID: a.EID(),
	}
	if a.HasFirstContactExt() {
		f.FirstContactExt = &FirstContactExt{
			V2Direct: a.V2Direct(), OSType: a.OSType(), Release: a.Release(), Hostname: a.Hostname(),
			MaxConns: a.MaxConns(), MaxLinks: a.MaxLinks(), FeatureMask: a.FeatureMask(),
			VendorOptions: a.VendorOptions(),
		}
	}
	for i := range a.NumGIDs() {
		f.GIDs = append(f.GIDs, a.ListGID(i))
	}
	return f
}

// AppendAcceptConfirm encodes f as an SMC-R Accept (or Confirm) appended
// to b: 68 bytes for version 1; for version 2 the EID, with FirstContact
// set the 52-byte first-contact extension (f.FirstContactExt, or
// zeros when nil), and in a first-contact Confirm the GID list.
func AppendAcceptConfirm(b []byte, f *AcceptConfirmFields) []byte {
	t := CLCAccept
	if f.Confirm {
		t = CLCConfirm
	}
	h := f.CLCHeader
	h.TypeV1 = TypeR
	b, start := startCLC(b, t, h)
	b, m := grow(b, acV1Len-CLCHeaderLen)
	o := func(off int) []byte { return m[off-CLCHeaderLen:] }
	copy(o(acPeerID), f.PeerID[:])
	copy(o(acGID), f.GID[:])
	copy(o(acMAC), f.MAC[:])
	putBE24(o(acQPN), f.QPN)
	binary.BigEndian.PutUint32(o(acRKey), f.RMBRKey)
	o(acRMBEIdx)[0] = f.RMBEIndex
	binary.BigEndian.PutUint32(o(acToken), f.AlertToken)
	o(acSizeMTU)[0] = f.RMBESizeCode<<4 | byte(f.QPMTU&0x0F)
	binary.BigEndian.PutUint64(o(acVA), f.RMBVA)
	putBE24(o(acPSN), f.PSN)
	if f.Version >= 2 {
		b = append(b, f.EID[:]...)
		b, _ = grow(b, 8)
		if f.FirstContact {
			var x []byte
			b, x = grow(b, fceLen)
			if e := f.FirstContactExt; e != nil {
				if e.V2Direct {
					x[0] = fceFlagDirect
				}
				x[1] = byte(e.OSType)<<4 | e.Release&0x0F
				copy(x[4:], e.Hostname[:])
				x[36], x[37] = e.MaxConns, e.MaxLinks
				binary.BigEndian.PutUint16(x[38:], e.FeatureMask)
				binary.BigEndian.PutUint32(x[40:], e.VendorOptions)
			}
			if f.Confirm {
				b = append(b, byte(len(f.GIDs)), 0, 0, 0)
				for _, g := range f.GIDs {
					b = append(b, g[:]...)
				}
			}
		}
	}
	return finishCLC(b, start)
}
