package cmwire

import "fmt"

// SIDRStatus is a SIDR_REP's status (IBTA table 121).
type SIDRStatus uint8

const (
	SIDRSuccess            SIDRStatus = 0
	SIDRUnsupported        SIDRStatus = 1 // service ID not supported
	SIDRReject             SIDRStatus = 2
	SIDRNoQP               SIDRStatus = 3
	SIDRRedirect           SIDRStatus = 4
	SIDRUnsupportedVersion SIDRStatus = 5
)

var sidrNames = [...]string{"success", "service ID not supported", "rejected", "no QP", "redirect", "unsupported version"}

func (s SIDRStatus) String() string {
	if int(s) < len(sidrNames) {
		return sidrNames[s]
	}
	return fmt.Sprintf("status %d", uint8(s))
}

// SIDRReq asks the QP number and Q_Key of a UD service.
type SIDRReq struct {
	RequestID   uint32 `json:"request_id"`
	PKey        uint16 `json:"pkey"`
	ServiceID   uint64 `json:"service_id"`
	PrivateData Bytes  `json:"private_data"`
}

var (
	sidrRequestID = field{0, 0, 32}
	sidrReqPKey   = field{4, 0, 16}
)

// DecodeSIDRReq reads a SIDR_REQ; PrivateData is a view into m.
func DecodeSIDRReq(m MAD) SIDRReq {
	return SIDRReq{RequestID: sidrRequestID.get(m), PKey: uint16(sidrReqPKey.get(m)), ServiceID: get64(m, 8),
		PrivateData: area(m, 16, SIDRReqPrivateLen)}
}

// Encode writes s into m's data; it reports whether the private data fits.
func (s *SIDRReq) Encode(m MAD) bool {
	sidrRequestID.set(m, s.RequestID)
	sidrReqPKey.set(m, uint32(s.PKey))
	put64(m, 8, s.ServiceID)
	return putArea(m, 16, SIDRReqPrivateLen, s.PrivateData)
}

// SIDRRep answers a SIDR_REQ.
type SIDRRep struct {
	RequestID   uint32     `json:"request_id"`
	Status      SIDRStatus `json:"status"`
	InfoLength  uint8      `json:"info_length"`
	VendorID    uint32     `json:"vendor_id"` // 24 bits
	QPN         uint32     `json:"qpn"`
	ServiceID   uint64     `json:"service_id"`
	QKey        uint32     `json:"qkey"`
	Info        Bytes      `json:"info"`
	PrivateData Bytes      `json:"private_data"`
}

var (
	sidrRepStatus  = field{4, 0, 8}
	sidrRepInfoLen = field{5, 0, 8}
	sidrRepVendorH = field{6, 0, 16}
	sidrRepQPN     = field{8, 0, 24}
	sidrRepVendorL = field{11, 0, 8}
	sidrRepQKey    = field{20, 0, 32}
)

// DecodeSIDRRep reads a SIDR_REP; Info and PrivateData are views into m.
func DecodeSIDRRep(m MAD) SIDRRep {
	return SIDRRep{RequestID: sidrRequestID.get(m), Status: SIDRStatus(sidrRepStatus.get(m)),
		InfoLength: uint8(sidrRepInfoLen.get(m)), VendorID: sidrRepVendorH.get(m)<<8 | sidrRepVendorL.get(m),
		QPN: sidrRepQPN.get(m), ServiceID: get64(m, 12), QKey: sidrRepQKey.get(m),
		Info: area(m, 24, SIDRRepInfoLen), PrivateData: area(m, 96, SIDRRepPrivateLen)}
}

// Encode writes s into m's data; it reports whether info and private data fit.
func (s *SIDRRep) Encode(m MAD) bool {
	sidrRequestID.set(m, s.RequestID)
	sidrRepStatus.set(m, uint32(s.Status))
	sidrRepInfoLen.set(m, uint32(s.InfoLength))
	sidrRepVendorH.set(m, s.VendorID>>8)
	sidrRepQPN.set(m, s.QPN)
	sidrRepVendorL.set(m, s.VendorID)
	put64(m, 12, s.ServiceID)
	sidrRepQKey.set(m, s.QKey)
	okInfo := putArea(m, 24, SIDRRepInfoLen, s.Info)
	return putArea(m, 96, SIDRRepPrivateLen, s.PrivateData) && okInfo
}
