package cmwire

// The two communication IDs every CM message but REQ and SIDR begins with.
var (
	localCommID  = field{0, 0, 32}
	remoteCommID = field{4, 0, 32}
)

// CommIDs returns the local and remote communication IDs of an MRA, REJ,
// REP, RTU, DREQ, DREP, LAP or APR (the sender's ID first).
func CommIDs(m MAD) (local, remote uint32) { return localCommID.get(m), remoteCommID.get(m) }

// RTU is ready-to-use, the third message of a connection.
type RTU struct {
	LocalCommID  uint32 `json:"local_comm_id"`
	RemoteCommID uint32 `json:"remote_comm_id"`
	PrivateData  Bytes  `json:"private_data"`
}

// DecodeRTU reads an RTU; PrivateData is a view into m.
func DecodeRTU(m MAD) RTU {
	l, r := CommIDs(m)
	return RTU{LocalCommID: l, RemoteCommID: r, PrivateData: area(m, 8, RTUPrivateLen)}
}

// Encode writes r into m's data; it reports whether the private data fits.
func (r *RTU) Encode(m MAD) bool {
	localCommID.set(m, r.LocalCommID)
	remoteCommID.set(m, r.RemoteCommID)
	return putArea(m, 8, RTUPrivateLen, r.PrivateData)
}

// DREQ is a disconnection request.
type DREQ struct {
	LocalCommID   uint32 `json:"local_comm_id"`
	RemoteCommID  uint32 `json:"remote_comm_id"`
	RemoteQPNEECN uint32 `json:"remote_qpn_eecn"`
	PrivateData   Bytes  `json:"private_data"`
}

var dreqRemoteQPN = field{8, 0, 24}

// DecodeDREQ reads a DREQ; PrivateData is a view into m.
func DecodeDREQ(m MAD) DREQ {
	l, r := CommIDs(m)
	return DREQ{LocalCommID: l, RemoteCommID: r, RemoteQPNEECN: dreqRemoteQPN.get(m), PrivateData: area(m, 12, DREQPrivateLen)}
}

// Encode writes d into m's data; it reports whether the private data fits.
func (d *DREQ) Encode(m MAD) bool {
	localCommID.set(m, d.LocalCommID)
	remoteCommID.set(m, d.RemoteCommID)
	dreqRemoteQPN.set(m, d.RemoteQPNEECN)
	return putArea(m, 12, DREQPrivateLen, d.PrivateData)
}

// DREP is a disconnection reply.
type DREP struct {
	LocalCommID  uint32 `json:"local_comm_id"`
	RemoteCommID uint32 `json:"remote_comm_id"`
	PrivateData  Bytes  `json:"private_data"`
}

// DecodeDREP reads a DREP; PrivateData is a view into m.
func DecodeDREP(m MAD) DREP {
	l, r := CommIDs(m)
	return DREP{LocalCommID: l, RemoteCommID: r, PrivateData: area(m, 8, DREPPrivateLen)}
}

// Encode writes d into m's data; it reports whether the private data fits.
func (d *DREP) Encode(m MAD) bool {
	localCommID.set(m, d.LocalCommID)
	remoteCommID.set(m, d.RemoteCommID)
	return putArea(m, 8, DREPPrivateLen, d.PrivateData)
}

// MessageKind says which message an MRA acknowledges or a REJ rejects.
type MessageKind uint8

const (
	MsgREQ   MessageKind = 0
	MsgREP   MessageKind = 1
	MsgOther MessageKind = 2 // LAP (MRA), or anything else (REJ)
)

func (k MessageKind) String() string {
	switch k {
	case MsgREQ:
		return "REQ"
	case MsgREP:
		return "REP"
	case MsgOther:
		return "other"
	}
	return "reserved"
}

// MRA acknowledges receipt of a message whose answer will take longer.
type MRA struct {
	LocalCommID    uint32      `json:"local_comm_id"`
	RemoteCommID   uint32      `json:"remote_comm_id"`
	MessageMRAed   MessageKind `json:"message_mraed"`
	ServiceTimeout uint8       `json:"service_timeout"`
	PrivateData    Bytes       `json:"private_data"`
}

var (
	mraMessage = field{8, 0, 2}
	mraTimeout = field{9, 0, 5}
)

// DecodeMRA reads an MRA; PrivateData is a view into m.
func DecodeMRA(m MAD) MRA {
	l, r := CommIDs(m)
	return MRA{LocalCommID: l, RemoteCommID: r, MessageMRAed: MessageKind(mraMessage.get(m)),
		ServiceTimeout: uint8(mraTimeout.get(m)), PrivateData: area(m, 10, MRAPrivateLen)}
}

// Encode writes a into m's data; it reports whether the private data fits.
func (a *MRA) Encode(m MAD) bool {
	localCommID.set(m, a.LocalCommID)
	remoteCommID.set(m, a.RemoteCommID)
	mraMessage.set(m, uint32(a.MessageMRAed))
	mraTimeout.set(m, uint32(a.ServiceTimeout))
	return putArea(m, 10, MRAPrivateLen, a.PrivateData)
}
