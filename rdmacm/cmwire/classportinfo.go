package cmwire

// ClassPortInfo is the class attribute every GSI class defines (IBTA
// 13.4.8.1): its version, capabilities, response time and redirection.
// Linux's ib_cm does not answer a Get of it (see Check); it is decoded for
// inspection and for answers other CMs give.
type ClassPortInfo struct {
	BaseVersion       uint8  `json:"base_version"`
	ClassVersion      uint8  `json:"class_version"`
	CapabilityMask    uint16 `json:"capability_mask"`
	CapabilityMask2   uint32 `json:"capability_mask2"` // 27 bits
	RespTimeValue     uint8  `json:"resp_time_value"`  // 5 bits
	RedirectGID       GID    `json:"redirect_gid"`
	RedirectTC        uint8  `json:"redirect_tc"`
	RedirectSL        uint8  `json:"redirect_sl"`
	RedirectFlowLabel uint32 `json:"redirect_fl"`
	RedirectLID       uint16 `json:"redirect_lid"`
	RedirectPKey      uint16 `json:"redirect_pkey"`
	RedirectQP        uint32 `json:"redirect_qp"`
	RedirectQKey      uint32 `json:"redirect_qkey"`
	TrapGID           GID    `json:"trap_gid"`
	TrapTC            uint8  `json:"trap_tc"`
	TrapSL            uint8  `json:"trap_sl"`
	TrapFlowLabel     uint32 `json:"trap_fl"`
	TrapLID           uint16 `json:"trap_lid"`
	TrapPKey          uint16 `json:"trap_pkey"`
	TrapHopLimit      uint8  `json:"trap_hl"`
	TrapQP            uint32 `json:"trap_qp"`
	TrapQKey          uint32 `json:"trap_qkey"`
}

// ClassPortInfoLen is the attribute's length in the MAD data.
const ClassPortInfoLen = 72

var (
	cpiBase      = field{0, 0, 8}
	cpiClass     = field{1, 0, 8}
	cpiCap       = field{2, 0, 16}
	cpiCap2      = field{4, 0, 27}
	cpiRespTime  = field{7, 3, 5}
	cpiRedirTC   = field{24, 0, 8}
	cpiRedirSL   = field{25, 0, 4}
	cpiRedirFL   = field{25, 4, 20}
	cpiRedirLID  = field{28, 0, 16}
	cpiRedirPKey = field{30, 0, 16}
	cpiRedirQP   = field{33, 0, 24}
	cpiRedirQKey = field{36, 0, 32}
	cpiTrapTC    = field{56, 0, 8}
	cpiTrapSL    = field{57, 0, 4}
	cpiTrapFL    = field{57, 4, 20}
	cpiTrapLID   = field{60, 0, 16}
	cpiTrapPKey  = field{62, 0, 16}
	cpiTrapHL    = field{64, 0, 8}
	cpiTrapQP    = field{65, 0, 24}
	cpiTrapQKey  = field{68, 0, 32}
)

// DecodeClassPortInfo reads the attribute from a MAD's data.
func DecodeClassPortInfo(m MAD) ClassPortInfo {
	return ClassPortInfo{
		BaseVersion: uint8(cpiBase.get(m)), ClassVersion: uint8(cpiClass.get(m)), CapabilityMask: uint16(cpiCap.get(m)),
		CapabilityMask2: cpiCap2.get(m), RespTimeValue: uint8(cpiRespTime.get(m)), RedirectGID: getGID(m, 8),
		RedirectTC: uint8(cpiRedirTC.get(m)), RedirectSL: uint8(cpiRedirSL.get(m)), RedirectFlowLabel: cpiRedirFL.get(m),
		RedirectLID: uint16(cpiRedirLID.get(m)), RedirectPKey: uint16(cpiRedirPKey.get(m)), RedirectQP: cpiRedirQP.get(m),
		RedirectQKey: cpiRedirQKey.get(m), TrapGID: getGID(m, 40), TrapTC: uint8(cpiTrapTC.get(m)),
		TrapSL: uint8(cpiTrapSL.get(m)), TrapFlowLabel: cpiTrapFL.get(m), TrapLID: uint16(cpiTrapLID.get(m)),
		TrapPKey: uint16(cpiTrapPKey.get(m)), TrapHopLimit: uint8(cpiTrapHL.get(m)), TrapQP: cpiTrapQP.get(m),
		TrapQKey: cpiTrapQKey.get(m),
	}
}

// Encode writes c into a MAD's data.
func (c *ClassPortInfo) Encode(m MAD) {
	cpiBase.set(m, uint32(c.BaseVersion))
	cpiClass.set(m, uint32(c.ClassVersion))
	cpiCap.set(m, uint32(c.CapabilityMask))
	cpiCap2.set(m, c.CapabilityMask2)
	cpiRespTime.set(m, uint32(c.RespTimeValue))
	putGID(m, 8, c.RedirectGID)
	cpiRedirTC.set(m, uint32(c.RedirectTC))
	cpiRedirSL.set(m, uint32(c.RedirectSL))
	cpiRedirFL.set(m, c.RedirectFlowLabel)
	cpiRedirLID.set(m, uint32(c.RedirectLID))
	cpiRedirPKey.set(m, uint32(c.RedirectPKey))
	cpiRedirQP.set(m, c.RedirectQP)
	cpiRedirQKey.set(m, c.RedirectQKey)
	putGID(m, 40, c.TrapGID)
	cpiTrapTC.set(m, uint32(c.TrapTC))
	cpiTrapSL.set(m, uint32(c.TrapSL))
	cpiTrapFL.set(m, c.TrapFlowLabel)
	cpiTrapLID.set(m, uint32(c.TrapLID))
	cpiTrapPKey.set(m, uint32(c.TrapPKey))
	cpiTrapHL.set(m, uint32(c.TrapHopLimit))
	cpiTrapQP.set(m, c.TrapQP)
	cpiTrapQKey.set(m, c.TrapQKey)
}
