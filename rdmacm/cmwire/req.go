package cmwire

// Private data sizes of the CM messages (IBTA table 106 and following).
const (
	REQPrivateLen     = 92
	MRAPrivateLen     = 222
	REJPrivateLen     = 148
	REJARILen         = 72
	REPPrivateLen     = 196
	RTUPrivateLen     = 224
	DREQPrivateLen    = 220
	DREPPrivateLen    = 224
	SIDRReqPrivateLen = 216
	SIDRRepPrivateLen = 136
	SIDRRepInfoLen    = 72
	LAPPrivateLen     = 168
	APRPrivateLen     = 148
	APRInfoLen        = 72
)

// Transport service types of a REQ (2 bits).
const (
	TransportRC = 0
	TransportUC = 1
	TransportRD = 2 // with extended transport type 1: XRC
)

// Path is one path of a REQ (primary or alternate): on RoCE the GIDs are
// the two IP addresses and the LIDs permissive (0xFFFF).
type Path struct {
	LocalLID        uint16 `json:"local_lid"`
	RemoteLID       uint16 `json:"remote_lid"`
	LocalGID        GID    `json:"local_gid"`
	RemoteGID       GID    `json:"remote_gid"`
	FlowLabel       uint32 `json:"flow_label"`
	PacketRate      uint8  `json:"packet_rate"`
	TrafficClass    uint8  `json:"traffic_class"`
	HopLimit        uint8  `json:"hop_limit"`
	SL              uint8  `json:"sl"`
	SubnetLocal     bool   `json:"subnet_local"`
	LocalACKTimeout uint8  `json:"local_ack_timeout"`
}

// Path fields at base 52 (primary) or 96 (alternate), relative offsets.
func pathFields(base uint8) (flow, rate, tclass, hop, sl, local, ack field) {
	return field{base + 36, 0, 20}, field{base + 39, 2, 6}, field{base + 40, 0, 8}, field{base + 41, 0, 8},
		field{base + 42, 0, 4}, field{base + 42, 4, 1}, field{base + 43, 0, 5}
}

func decodePath(m MAD, base uint8) Path {
	flow, rate, tclass, hop, sl, local, ack := pathFields(base)
	return Path{
		LocalLID: uint16(field{base, 0, 16}.get(m)), RemoteLID: uint16(field{base + 2, 0, 16}.get(m)),
		LocalGID: getGID(m, int(base)+4), RemoteGID: getGID(m, int(base)+20),
		FlowLabel: flow.get(m), PacketRate: uint8(rate.get(m)), TrafficClass: uint8(tclass.get(m)),
		HopLimit: uint8(hop.get(m)), SL: uint8(sl.get(m)), SubnetLocal: local.flag(m),
		LocalACKTimeout: uint8(ack.get(m)),
	}
}

func (p *Path) encode(m MAD, base uint8) {
	flow, rate, tclass, hop, sl, local, ack := pathFields(base)
	field{base, 0, 16}.set(m, uint32(p.LocalLID))
	field{base + 2, 0, 16}.set(m, uint32(p.RemoteLID))
	putGID(m, int(base)+4, p.LocalGID)
	putGID(m, int(base)+20, p.RemoteGID)
	flow.set(m, p.FlowLabel)
	rate.set(m, uint32(p.PacketRate))
	tclass.set(m, uint32(p.TrafficClass))
	hop.set(m, uint32(p.HopLimit))
	sl.set(m, uint32(p.SL))
	local.setFlag(m, p.SubnetLocal)
	ack.set(m, uint32(p.LocalACKTimeout))
}

// REQ fields (IBTA table 106).
var (
	reqLocalCommID   = field{0, 0, 32}
	reqVendorID      = field{5, 0, 24}
	reqLocalQKey     = field{28, 0, 32}
	reqLocalQPN      = field{32, 0, 24}
	reqRespRes       = field{35, 0, 8}
	reqLocalEECN     = field{36, 0, 24}
	reqInitDepth     = field{39, 0, 8}
	reqRemoteEECN    = field{40, 0, 24}
	reqRemoteTimeout = field{43, 0, 5}
	reqTransport     = field{43, 5, 2}
	reqFlowControl   = field{43, 7, 1}
	reqStartingPSN   = field{44, 0, 24}
	reqLocalTimeout  = field{47, 0, 5}
	reqRetryCount    = field{47, 5, 3}
	reqPKey          = field{48, 0, 16}
	reqPathMTU       = field{50, 0, 4}
	reqRDCExists     = field{50, 4, 1}
	reqRNRRetry      = field{50, 5, 3}
	reqMaxCMRetries  = field{51, 0, 4}
	reqSRQ           = field{51, 4, 1}
	reqExtTransport  = field{51, 5, 3}
	reqSAPSupported  = field{139, 5, 1}
)

// REQ is a connection request.
type REQ struct {
	LocalCommID             uint32 `json:"local_comm_id"`
	VendorID                uint32 `json:"vendor_id"`
	ServiceID               uint64 `json:"service_id"`
	LocalCAGUID             uint64 `json:"local_ca_guid"`
	LocalQKey               uint32 `json:"local_qkey"`
	LocalQPN                uint32 `json:"local_qpn"`
	ResponderResources      uint8  `json:"responder_resources"`
	LocalEECN               uint32 `json:"local_eecn"`
	InitiatorDepth          uint8  `json:"initiator_depth"`
	RemoteEECN              uint32 `json:"remote_eecn"`
	RemoteCMResponseTimeout uint8  `json:"remote_cm_response_timeout"`
	TransportType           uint8  `json:"transport_type"`
	FlowControl             bool   `json:"flow_control"`
	StartingPSN             uint32 `json:"starting_psn"`
	LocalCMResponseTimeout  uint8  `json:"local_cm_response_timeout"`
	RetryCount              uint8  `json:"retry_count"`
	PKey                    uint16 `json:"pkey"`
	PathMTU                 uint8  `json:"path_mtu"`
	RDCExists               bool   `json:"rdc_exists"`
	RNRRetryCount           uint8  `json:"rnr_retry_count"`
	MaxCMRetries            uint8  `json:"max_cm_retries"`
	SRQ                     bool   `json:"srq"`
	ExtTransportType        uint8  `json:"ext_transport_type"`
	Primary                 Path   `json:"primary_path"`
	Alternate               Path   `json:"alternate_path"`
	SAPSupported            bool   `json:"sap_supported"`
	PrivateData             Bytes  `json:"private_data"`
}

// DecodeREQ reads a REQ; PrivateData is a view into m.
func DecodeREQ(m MAD) REQ {
	return REQ{
		LocalCommID: reqLocalCommID.get(m), VendorID: reqVendorID.get(m), ServiceID: get64(m, 8),
		LocalCAGUID: get64(m, 16), LocalQKey: reqLocalQKey.get(m), LocalQPN: reqLocalQPN.get(m),
		ResponderResources: uint8(reqRespRes.get(m)), LocalEECN: reqLocalEECN.get(m),
		InitiatorDepth: uint8(reqInitDepth.get(m)), RemoteEECN: reqRemoteEECN.get(m),
		RemoteCMResponseTimeout: uint8(reqRemoteTimeout.get(m)), TransportType: uint8(reqTransport.get(m)),
		FlowControl: reqFlowControl.flag(m), StartingPSN: reqStartingPSN.get(m),
		LocalCMResponseTimeout: uint8(reqLocalTimeout.get(m)), RetryCount: uint8(reqRetryCount.get(m)),
		PKey: uint16(reqPKey.get(m)), PathMTU: uint8(reqPathMTU.get(m)), RDCExists: reqRDCExists.flag(m),
		RNRRetryCount: uint8(reqRNRRetry.get(m)), MaxCMRetries: uint8(reqMaxCMRetries.get(m)),
		SRQ: reqSRQ.flag(m), ExtTransportType: uint8(reqExtTransport.get(m)),
		Primary: decodePath(m, 52), Alternate: decodePath(m, 96), SAPSupported: reqSAPSupported.flag(m),
		PrivateData: area(m, 140, REQPrivateLen),
	}
}

// Encode writes r into m's data (the header is NewCM's); it reports
// whether the private data fits.
func (r *REQ) Encode(m MAD) bool {
	reqLocalCommID.set(m, r.LocalCommID)
	reqVendorID.set(m, r.VendorID)
	put64(m, 8, r.ServiceID)
	put64(m, 16, r.LocalCAGUID)
	reqLocalQKey.set(m, r.LocalQKey)
	reqLocalQPN.set(m, r.LocalQPN)
	reqRespRes.set(m, uint32(r.ResponderResources))
	reqLocalEECN.set(m, r.LocalEECN)
	reqInitDepth.set(m, uint32(r.InitiatorDepth))
	reqRemoteEECN.set(m, r.RemoteEECN)
	reqRemoteTimeout.set(m, uint32(r.RemoteCMResponseTimeout))
	reqTransport.set(m, uint32(r.TransportType))
	reqFlowControl.setFlag(m, r.FlowControl)
	reqStartingPSN.set(m, r.StartingPSN)
	reqLocalTimeout.set(m, uint32(r.LocalCMResponseTimeout))
	reqRetryCount.set(m, uint32(r.RetryCount))
	reqPKey.set(m, uint32(r.PKey))
	reqPathMTU.set(m, uint32(r.PathMTU))
	reqRDCExists.setFlag(m, r.RDCExists)
	reqRNRRetry.set(m, uint32(r.RNRRetryCount))
	reqMaxCMRetries.set(m, uint32(r.MaxCMRetries))
	reqSRQ.setFlag(m, r.SRQ)
	reqExtTransport.set(m, uint32(r.ExtTransportType))
	r.Primary.encode(m, 52)
	r.Alternate.encode(m, 96)
	reqSAPSupported.setFlag(m, r.SAPSupported)
	return putArea(m, 140, REQPrivateLen, r.PrivateData)
}

// HasAlternatePath reports whether the REQ names an alternate path, as
// ib_cm decides it (a non-zero alternate local LID).
func (r *REQ) HasAlternatePath() bool { return r.Alternate.LocalLID != 0 }
