package smcwire

import (
	"encoding/binary"
	"fmt"
)

// CLC Decline (type 4): header (byte 7: version, 0x08 out of sync), sender
// peer ID (8), peer diagnosis (4), OS type<<4 (1), reserved (3), in v2
// four more diagnosis codes (16), trailer. 28 bytes for v1, 44 for v2
// (Linux struct smc_clc_msg_decline / _v2).
const (
	dclPeerID    = 8
	dclDiag      = 16
	dclOS        = 20
	dclV1Body    = 24
	dclV2Diag    = 24
	dclV2Body    = 40
	numV2Diags   = 4
	DeclineV1Len = dclV1Body + CLCTrailerLen
	DeclineV2Len = dclV2Body + CLCTrailerLen
)

// Decline is a view of a CLC Decline.
type Decline struct{ CLC }

// ParseDecline checks b as a CLC Decline: the common header and room for
// the v1 fields. A v2 Decline long enough for them carries the extra
// diagnosis codes.
func ParseDecline(b []byte) (Decline, error) {
	c, err := ParseCLC(b)
	if err != nil {
		return Decline{}, err
	}
	if c.Type() != CLCDecline {
		return Decline{}, ErrType
	}
	if len(c) < DeclineV1Len {
		return Decline{}, ErrLength
	}
	return Decline{c}, nil
}

// PeerID returns the 'sender peer ID'.
func (d Decline) PeerID() PeerID { return PeerID(d.CLC[dclPeerID:]) }

// Diagnosis returns the 'peer diagnosis' code: why the sender declined.
func (d Decline) Diagnosis() DiagCode { return DiagCode(binary.BigEndian.Uint32(d.CLC[dclDiag:])) }

// OSType returns the sender's 'OS type' (bits 7-4 of byte 20).
func (d Decline) OSType() OSType { return OSType(d.CLC[dclOS] >> 4) }

// NumExtraDiagnoses returns how many additional v2 diagnosis codes the message holds (0 or 4).
func (d Decline) NumExtraDiagnoses() int {
	if d.Version() >= 2 && len(d.CLC)-CLCTrailerLen >= dclV2Body {
		return numV2Diags
	}
	return 0
}

// ExtraDiagnosis returns additional v2 diagnosis code i (0 <= i < NumExtraDiagnoses).
func (d Decline) ExtraDiagnosis(i int) DiagCode {
	if i < 0 || i >= d.NumExtraDiagnoses() {
		return 0
	}
	return DiagCode(binary.BigEndian.Uint32(d.CLC[dclV2Diag+4*i:]))
}

// DeclineFields holds every field of a Decline. CLCHeader.FirstContact is
// the out-of-sync flag.
type DeclineFields struct {
	CLCHeader
	PeerID     PeerID     `json:"peer_id"`
	Diagnosis  DiagCode   `json:"diagnosis"`
	OSType     OSType     `json:"os_type"`
	ExtraDiags []DiagCode `json:"extra_diags,omitempty"` // v2: up to 4
}

// Fields copies the Decline into a DeclineFields.
func (d Decline) Fields() DeclineFields {
	f := DeclineFields{CLCHeader: d.Header(), PeerID: d.PeerID(), Diagnosis: d.Diagnosis(), OSType: d.OSType()}
	for i := range d.NumExtraDiagnoses() {
		f.ExtraDiags = append(f.ExtraDiags, d.ExtraDiagnosis(i))
	}
	return f
}

// AppendDecline encodes f as a Decline appended to b: 28 bytes, or 44
// with the four extra diagnosis codes when the version is 2 and ExtraDiags
// is not empty (beyond 4 are dropped, missing ones are 0). Linux sends
// every version 2 Decline in the 44-byte form.
func AppendDecline(b []byte, f *DeclineFields) []byte {
	b, start := startCLC(b, CLCDecline, f.CLCHeader)
	b = append(b, f.PeerID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(f.Diagnosis))
	b = append(b, byte(f.OSType)<<4, 0, 0, 0)
	if f.Version >= 2 && len(f.ExtraDiags) > 0 {
		for i := range numV2Diags {
			var v DiagCode
			if i < len(f.ExtraDiags) {
				v = f.ExtraDiags[i]
			}
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		}
	}
	return finishCLC(b, start)
}

// DiagCode is a CLC Decline 'peer diagnosis' code (Linux SMC_CLC_DECL_*).
type DiagCode uint32

// Peer diagnosis codes Linux sends.
const (
	DiagMem          DiagCode = 0x01010000
	DiagTimeoutCL    DiagCode = 0x02010000
	DiagTimeoutAL    DiagCode = 0x02020000
	DiagCnfErr       DiagCode = 0x03000000
	DiagPeerNoSMC    DiagCode = 0x03010000
	DiagIPsec        DiagCode = 0x03020000
	DiagNoSMCDev     DiagCode = 0x03030000
	DiagNoSMCDDev    DiagCode = 0x03030001
	DiagNoSMCRDev    DiagCode = 0x03030002
	DiagNoISM2Supp   DiagCode = 0x03030003
	DiagNoV2Ext      DiagCode = 0x03030004
	DiagNoV2DExt     DiagCode = 0x03030005
	DiagNoSEID       DiagCode = 0x03030006
	DiagNoSMCD2Dev   DiagCode = 0x03030007
	DiagNoUEID       DiagCode = 0x03030008
	DiagReleaseErr   DiagCode = 0x03030009
	DiagMaxConnErr   DiagCode = 0x0303000a
	DiagMaxLinkErr   DiagCode = 0x0303000b
	DiagModeUnsupp   DiagCode = 0x03040000
	DiagRMBEEC       DiagCode = 0x03050000
	DiagOptUnsupp    DiagCode = 0x03060000
	DiagDiffPrefix   DiagCode = 0x03070000
	DiagGetVLANErr   DiagCode = 0x03080000
	DiagISMVLANErr   DiagCode = 0x03090000
	DiagNoActLink    DiagCode = 0x030a0000
	DiagNoSrvLink    DiagCode = 0x030b0000
	DiagVersMismatch DiagCode = 0x030c0000
	DiagMaxDMB       DiagCode = 0x030d0000
	DiagNoRoute      DiagCode = 0x030e0000
	DiagNoIndirect   DiagCode = 0x030f0000
	DiagSyncErr      DiagCode = 0x04000000
	DiagPeerDecl     DiagCode = 0x05000000
	DiagIntErr       DiagCode = 0x09990000
	DiagErrRTok      DiagCode = 0x09990001
	DiagErrRdyLnk    DiagCode = 0x09990002
	DiagErrRegBuf    DiagCode = 0x09990003
)

var diagNames = map[DiagCode]string{
	DiagMem:          "insufficient memory",
	DiagTimeoutCL:    "timeout waiting for CONFIRM LINK",
	DiagTimeoutAL:    "timeout waiting for ADD LINK",
	DiagCnfErr:       "configuration error",
	DiagPeerNoSMC:    "peer did not indicate SMC",
	DiagIPsec:        "IPsec in use",
	DiagNoSMCDev:     "no SMC device",
	DiagNoSMCDDev:    "no SMC-D device",
	DiagNoSMCRDev:    "no SMC-R device",
	DiagNoISM2Supp:   "no ISMv2 support",
	DiagNoV2Ext:      "no v2 extension",
	DiagNoV2DExt:     "no SMC-Dv2 extension",
	DiagNoSEID:       "no SEID",
	DiagNoSMCD2Dev:   "no SMC-Dv2 device",
	DiagNoUEID:       "no UEID",
	DiagReleaseErr:   "release mismatch",
	DiagMaxConnErr:   "max conns mismatch",
	DiagMaxLinkErr:   "max links mismatch",
	DiagModeUnsupp:   "SMC modes do not match",
	DiagRMBEEC:       "peer uses RMBE eyecatchers",
	DiagOptUnsupp:    "fastopen sockopt not supported",
	DiagDiffPrefix:   "IP prefix/subnet mismatch",
	DiagGetVLANErr:   "cannot get VLAN id",
	DiagISMVLANErr:   "cannot register VLAN id on ISM device",
	DiagNoActLink:    "no active SMC-R link in link group",
	DiagNoSrvLink:    "SMC-R link from server not found",
	DiagVersMismatch: "SMC version mismatch",
	DiagMaxDMB:       "SMC-D DMB limit",
	DiagNoRoute:      "SMC-Rv2 no route to peer",
	DiagNoIndirect:   "SMC-Rv2 indirect mismatch",
	DiagSyncErr:      "synchronization error",
	DiagPeerDecl:     "peer declined during handshake",
	DiagIntErr:       "internal error",
	DiagErrRTok:      "rtoken handling failed",
	DiagErrRdyLnk:    "link ready failed",
	DiagErrRegBuf:    "buffer registration failed",
}

// Name returns the code's meaning, or "" if Linux does not define it.
func (d DiagCode) Name() string { return diagNames[d] }

// String returns e.g. "0x03070000 (IP prefix/subnet mismatch)".
func (d DiagCode) String() string {
	if n := d.Name(); n != "" {
		return fmt.Sprintf("0x%08x (%s)", uint32(d), n)
	}
	return fmt.Sprintf("0x%08x", uint32(d))
}
