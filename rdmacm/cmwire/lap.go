package cmwire

// LAP loads an alternate path. Linux does not take it on RoCE (ib_cm's
// cm_lap_handler returns at once there); it is decoded for inspection.
type LAP struct {
	LocalCommID             uint32 `json:"local_comm_id"`
	RemoteCommID            uint32 `json:"remote_comm_id"`
	RemoteQPNEECN           uint32 `json:"remote_qpn_eecn"`
	RemoteCMResponseTimeout uint8  `json:"remote_cm_response_timeout"`
	AltLocalLID             uint16 `json:"alt_local_lid"`
	AltRemoteLID            uint16 `json:"alt_remote_lid"`
	AltLocalGID             GID    `json:"alt_local_gid"`
	AltRemoteGID            GID    `json:"alt_remote_gid"`
	AltFlowLabel            uint32 `json:"alt_flow_label"`
	AltTrafficClass         uint8  `json:"alt_traffic_class"`
	AltHopLimit             uint8  `json:"alt_hop_limit"`
	AltPacketRate           uint8  `json:"alt_packet_rate"`
	AltSL                   uint8  `json:"alt_sl"`
	AltSubnetLocal          bool   `json:"alt_subnet_local"`
	AltLocalACKTimeout      uint8  `json:"alt_local_ack_timeout"`
	PrivateData             Bytes  `json:"private_data"`
}

var (
	lapRemoteQPN   = field{12, 0, 24}
	lapTimeout     = field{15, 0, 5}
	lapLocalLID    = field{20, 0, 16}
	lapRemoteLID   = field{22, 0, 16}
	lapFlowLabel   = field{56, 0, 20}
	lapTClass      = field{59, 0, 8}
	lapHopLimit    = field{60, 0, 8}
	lapRate        = field{61, 2, 6}
	lapSL          = field{62, 0, 4}
	lapSubnetLocal = field{62, 4, 1}
	lapACKTimeout  = field{63, 0, 5}
)

// DecodeLAP reads a LAP; PrivateData is a view into m.
func DecodeLAP(m MAD) LAP {
	l, r := CommIDs(m)
	return LAP{LocalCommID: l, RemoteCommID: r, RemoteQPNEECN: lapRemoteQPN.get(m),
		RemoteCMResponseTimeout: uint8(lapTimeout.get(m)), AltLocalLID: uint16(lapLocalLID.get(m)),
		AltRemoteLID: uint16(lapRemoteLID.get(m)), AltLocalGID: getGID(m, 24), AltRemoteGID: getGID(m, 40),
		AltFlowLabel: lapFlowLabel.get(m), AltTrafficClass: uint8(lapTClass.get(m)),
		AltHopLimit: uint8(lapHopLimit.get(m)), AltPacketRate: uint8(lapRate.get(m)), AltSL: uint8(lapSL.get(m)),
		AltSubnetLocal: lapSubnetLocal.flag(m), AltLocalACKTimeout: uint8(lapACKTimeout.get(m)),
		PrivateData: area(m, 64, LAPPrivateLen)}
}

// Encode writes l into m's data; it reports whether the private data fits.
func (l *LAP) Encode(m MAD) bool {
	localCommID.set(m, l.LocalCommID)
	remoteCommID.set(m, l.RemoteCommID)
	lapRemoteQPN.set(m, l.RemoteQPNEECN)
	lapTimeout.set(m, uint32(l.RemoteCMResponseTimeout))
	lapLocalLID.set(m, uint32(l.AltLocalLID))
	lapRemoteLID.set(m, uint32(l.AltRemoteLID))
	putGID(m, 24, l.AltLocalGID)
	putGID(m, 40, l.AltRemoteGID)
	lapFlowLabel.set(m, l.AltFlowLabel)
	lapTClass.set(m, uint32(l.AltTrafficClass))
	lapHopLimit.set(m, uint32(l.AltHopLimit))
	lapRate.set(m, uint32(l.AltPacketRate))
	lapSL.set(m, uint32(l.AltSL))
	lapSubnetLocal.setFlag(m, l.AltSubnetLocal)
	lapACKTimeout.set(m, uint32(l.AltLocalACKTimeout))
	return putArea(m, 64, LAPPrivateLen, l.PrivateData)
}

// APR answers a LAP (decoded for inspection, as LAP).
type APR struct {
	LocalCommID  uint32 `json:"local_comm_id"`
	RemoteCommID uint32 `json:"remote_comm_id"`
	InfoLength   uint8  `json:"info_length"`
	Status       uint8  `json:"ap_status"`
	Info         Bytes  `json:"info"`
	PrivateData  Bytes  `json:"private_data"`
}

var (
	aprInfoLen = field{8, 0, 8}
	aprStatus  = field{9, 0, 8}
)

// DecodeAPR reads an APR; Info and PrivateData are views into m.
func DecodeAPR(m MAD) APR {
	l, r := CommIDs(m)
	return APR{LocalCommID: l, RemoteCommID: r, InfoLength: uint8(aprInfoLen.get(m)), Status: uint8(aprStatus.get(m)),
		Info: area(m, 12, APRInfoLen), PrivateData: area(m, 84, APRPrivateLen)}
}

// Encode writes a into m's data; it reports whether info and private data fit.
func (a *APR) Encode(m MAD) bool {
	localCommID.set(m, a.LocalCommID)
	remoteCommID.set(m, a.RemoteCommID)
	aprInfoLen.set(m, uint32(a.InfoLength))
	aprStatus.set(m, uint32(a.Status))
	okInfo := putArea(m, 12, APRInfoLen, a.Info)
	return putArea(m, 84, APRPrivateLen, a.PrivateData) && okInfo
}
