package device

import "github.com/goroce/goroce/rocev2"

// Limits of a goroce device, following rxe's defaults (rxe_param.h) where
// they make sense for a user-space device.
const (
	MaxQP           = 16384
	MaxQPWR         = 16384
	MaxSGE          = 32
	MaxCQE          = 32767
	MaxMR           = 65536
	MaxQPRdAtom     = 128
	MaxInlineData   = 400
	MaxMsgSize      = 1 << 31
	MaxPKeys        = 1
	MaxSRQ          = 1024
	MaxSRQWR        = MaxQPWR
	MaxSRQSGE       = MaxSGE
	FirstQPN        = 0x11 // QPNs 0-15 are reserved; 1 is the GSI QP
	LocalCAAckDelay = 15
)

// DeviceAttr mirrors the useful fields of ibv_device_attr.
type DeviceAttr struct {
	FWVer           string
	NodeGUID        uint64
	SysImageGUID    uint64
	MaxMRSize       uint64
	VendorID        uint32
	VendorPartID    uint32
	HWVer           uint32
	MaxQP           int
	MaxQPWR         int
	MaxSGE          int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxQPRdAtom     int
	MaxQPInitRdAtom int
	MaxResRdAtom    int
	MaxInlineData   int
	MaxSRQ          int
	MaxSRQWR        int
	MaxSRQSGE       int
	MaxPKeys        int
	LocalCAAckDelay int
	PhysPortCnt     int
	NumCompVectors  int
	AtomicCap       string
}

// PortState mirrors ibv_port_state.
type PortState uint8

const (
	PortDown   PortState = 1
	PortActive PortState = 4
)

func (s PortState) String() string {
	if s == PortActive {
		return "PORT_ACTIVE"
	}
	return "PORT_DOWN"
}

// PortAttr mirrors the useful fields of ibv_port_attr.
type PortAttr struct {
	State        PortState
	MaxMTU       rocev2.MTU
	ActiveMTU    rocev2.MTU
	GIDTableLen  int
	PKeyTableLen int
	MaxMsgSize   uint64
	LinkLayer    string
	LinkMTU      int // the IP MTU of the backend's link
}
