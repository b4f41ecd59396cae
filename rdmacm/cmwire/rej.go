package cmwire

import "fmt"

// RejReason is a REJ's reason code (IBTA table 109, Linux's enum
// ib_cm_rej_reason).
type RejReason uint16

const (
	RejNoQP                      RejReason = 1
	RejNoEEC                     RejReason = 2
	RejNoResources               RejReason = 3
	RejTimeout                   RejReason = 4
	RejUnsupported               RejReason = 5
	RejInvalidCommID             RejReason = 6
	RejInvalidCommInstance       RejReason = 7
	RejInvalidServiceID          RejReason = 8
	RejInvalidTransportType      RejReason = 9
	RejStaleConn                 RejReason = 10
	RejRDCNotExist               RejReason = 11
	RejInvalidGID                RejReason = 12
	RejInvalidLID                RejReason = 13
	RejInvalidSL                 RejReason = 14
	RejInvalidTrafficClass       RejReason = 15
	RejInvalidHopLimit           RejReason = 16
	RejInvalidPacketRate         RejReason = 17
	RejInvalidAltGID             RejReason = 18
	RejInvalidAltLID             RejReason = 19
	RejInvalidAltSL              RejReason = 20
	RejInvalidAltTrafficClass    RejReason = 21
	RejInvalidAltHopLimit        RejReason = 22
	RejInvalidAltPacketRate      RejReason = 23
	RejPortCMRedirect            RejReason = 24
	RejPortRedirect              RejReason = 25
	RejInvalidMTU                RejReason = 26
	RejInsufficientRespResources RejReason = 27
	RejConsumerDefined           RejReason = 28
	RejInvalidRNRRetry           RejReason = 29
	RejDuplicateLocalCommID      RejReason = 30
	RejInvalidClassVersion       RejReason = 31
	RejInvalidFlowLabel          RejReason = 32
	RejInvalidAltFlowLabel       RejReason = 33
	RejVendorOptionNotSupported  RejReason = 35
)

// rejNames are Linux's ibcm_reject_msg strings.
var rejNames = map[RejReason]string{
	RejNoQP: "no QP", RejNoEEC: "no EEC", RejNoResources: "no resources", RejTimeout: "timeout",
	RejUnsupported: "unsupported", RejInvalidCommID: "invalid comm ID", RejInvalidCommInstance: "invalid comm instance",
	RejInvalidServiceID: "invalid service ID", RejInvalidTransportType: "invalid transport type",
	RejStaleConn: "stale conn", RejRDCNotExist: "RDC not exist", RejInvalidGID: "invalid GID",
	RejInvalidLID: "invalid LID", RejInvalidSL: "invalid SL", RejInvalidTrafficClass: "invalid traffic class",
	RejInvalidHopLimit: "invalid hop limit", RejInvalidPacketRate: "invalid packet rate",
	RejInvalidAltGID: "invalid alt GID", RejInvalidAltLID: "invalid alt LID", RejInvalidAltSL: "invalid alt SL",
	RejInvalidAltTrafficClass: "invalid alt traffic class", RejInvalidAltHopLimit: "invalid alt hop limit",
	RejInvalidAltPacketRate: "invalid alt packet rate", RejPortCMRedirect: "port CM redirect",
	RejPortRedirect: "port redirect", RejInvalidMTU: "invalid MTU",
	RejInsufficientRespResources: "insufficient resp resources", RejConsumerDefined: "consumer defined",
	RejInvalidRNRRetry: "invalid RNR retry", RejDuplicateLocalCommID: "duplicate local comm ID",
	RejInvalidClassVersion: "invalid class version", RejInvalidFlowLabel: "invalid flow label",
	RejInvalidAltFlowLabel: "invalid alt flow label", RejVendorOptionNotSupported: "vendor option is not supported",
}

// String returns Linux's text for the reason ("consumer defined").
func (r RejReason) String() string {
	if n, ok := rejNames[r]; ok {
		return n
	}
	return fmt.Sprintf("unrecognized reason %d", uint16(r))
}

// REJ rejects a REQ or a REP, or ends a connection being set up.
type REJ struct {
	LocalCommID     uint32      `json:"local_comm_id"`
	RemoteCommID    uint32      `json:"remote_comm_id"`
	MessageRejected MessageKind `json:"message_rejected"`
	ARILength       uint8       `json:"ari_length"`
	Reason          RejReason   `json:"reason"`
	ARI             Bytes       `json:"ari"`
	PrivateData     Bytes       `json:"private_data"`
}

var (
	rejMessage = field{8, 0, 2}
	rejARILen  = field{9, 0, 7}
	rejReason  = field{10, 0, 16}
)

// DecodeREJ reads a REJ; ARI (all 72 bytes; ARILength says how many
// count) and PrivateData are views into m.
func DecodeREJ(m MAD) REJ {
	l, r := CommIDs(m)
	return REJ{LocalCommID: l, RemoteCommID: r, MessageRejected: MessageKind(rejMessage.get(m)),
		ARILength: uint8(rejARILen.get(m)), Reason: RejReason(rejReason.get(m)),
		ARI: area(m, 12, REJARILen), PrivateData: area(m, 84, REJPrivateLen)}
}

// ARIBytes returns the ARI bytes the REJ says are valid (at most 72).
func (r *REJ) ARIBytes() []byte { return r.ARI[:min(int(r.ARILength), len(r.ARI))] }

// Encode writes r into m's data; it reports whether ARI and private data fit.
func (r *REJ) Encode(m MAD) bool {
	localCommID.set(m, r.LocalCommID)
	remoteCommID.set(m, r.RemoteCommID)
	rejMessage.set(m, uint32(r.MessageRejected))
	rejARILen.set(m, uint32(r.ARILength))
	rejReason.set(m, uint32(r.Reason))
	okARI := putArea(m, 12, REJARILen, r.ARI)
	return putArea(m, 84, REJPrivateLen, r.PrivateData) && okARI
}
