package cmwire

// REP fields (IBTA table 110).
var (
	repLocalCommID  = field{0, 0, 32}
	repRemoteCommID = field{4, 0, 32}
	repLocalQKey    = field{8, 0, 32}
	repLocalQPN     = field{12, 0, 24}
	repVendorIDH    = field{15, 0, 8}
	repLocalEECN    = field{16, 0, 24}
	repVendorIDM    = field{19, 0, 8}
	repStartingPSN  = field{20, 0, 24}
	repVendorIDL    = field{23, 0, 8}
	repRespRes      = field{24, 0, 8}
	repInitDepth    = field{25, 0, 8}
	repTargetACK    = field{26, 0, 5}
	repFailover     = field{26, 5, 2}
	repFlowControl  = field{26, 7, 1}
	repRNRRetry     = field{27, 0, 3}
	repSRQ          = field{27, 3, 1}
)

// Failover values of a REP.
const (
	FailoverAccepted    = 0
	FailoverNotAccepted = 1 // not supported
	FailoverRejected    = 2
)

// REP is a connection reply.
type REP struct {
	LocalCommID        uint32 `json:"local_comm_id"`
	RemoteCommID       uint32 `json:"remote_comm_id"`
	LocalQKey          uint32 `json:"local_qkey"`
	LocalQPN           uint32 `json:"local_qpn"`
	LocalEECN          uint32 `json:"local_eecn"`
	StartingPSN        uint32 `json:"starting_psn"`
	VendorID           uint32 `json:"vendor_id"` // 24 bits in three bytes
	ResponderResources uint8  `json:"responder_resources"`
	InitiatorDepth     uint8  `json:"initiator_depth"`
	TargetACKDelay     uint8  `json:"target_ack_delay"`
	Failover           uint8  `json:"failover"`
	FlowControl        bool   `json:"flow_control"`
	RNRRetryCount      uint8  `json:"rnr_retry_count"`
	SRQ                bool   `json:"srq"`
	LocalCAGUID        uint64 `json:"local_ca_guid"`
	PrivateData        Bytes  `json:"private_data"`
}

// DecodeREP reads a REP; PrivateData is a view into m.
func DecodeREP(m MAD) REP {
	return REP{
		LocalCommID: repLocalCommID.get(m), RemoteCommID: repRemoteCommID.get(m),
		LocalQKey: repLocalQKey.get(m), LocalQPN: repLocalQPN.get(m), LocalEECN: repLocalEECN.get(m),
		StartingPSN:        repStartingPSN.get(m),
		VendorID:           repVendorIDH.get(m)<<16 | repVendorIDM.get(m)<<8 | repVendorIDL.get(m),
		ResponderResources: uint8(repRespRes.get(m)), InitiatorDepth: uint8(repInitDepth.get(m)),
		TargetACKDelay: uint8(repTargetACK.get(m)), Failover: uint8(repFailover.get(m)),
		FlowControl: repFlowControl.flag(m), RNRRetryCount: uint8(repRNRRetry.get(m)),
		SRQ: repSRQ.flag(m), LocalCAGUID: get64(m, 28), PrivateData: area(m, 36, REPPrivateLen),
	}
}

// Encode writes r into m's data; it reports whether the private data fits.
func (r *REP) Encode(m MAD) bool {
	repLocalCommID.set(m, r.LocalCommID)
	repRemoteCommID.set(m, r.RemoteCommID)
	repLocalQKey.set(m, r.LocalQKey)
	repLocalQPN.set(m, r.LocalQPN)
	repLocalEECN.set(m, r.LocalEECN)
	repStartingPSN.set(m, r.StartingPSN)
	repVendorIDH.set(m, r.VendorID>>16)
	repVendorIDM.set(m, r.VendorID>>8)
	repVendorIDL.set(m, r.VendorID)
	repRespRes.set(m, uint32(r.ResponderResources))
	repInitDepth.set(m, uint32(r.InitiatorDepth))
	repTargetACK.set(m, uint32(r.TargetACKDelay))
	repFailover.set(m, uint32(r.Failover))
	repFlowControl.setFlag(m, r.FlowControl)
	repRNRRetry.set(m, uint32(r.RNRRetryCount))
	repSRQ.setFlag(m, r.SRQ)
	put64(m, 28, r.LocalCAGUID)
	return putArea(m, 36, REPPrivateLen, r.PrivateData)
}
