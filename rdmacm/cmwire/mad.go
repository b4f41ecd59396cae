package cmwire

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// MAD sizes: every MAD on QP 1 is 256 bytes, a 24-byte common header and
// 232 bytes of class data.
const (
	MADLen    = 256
	HeaderLen = 24
	DataLen   = MADLen - HeaderLen
)

// GSI addressing: MADs go to QP 1 with this Q_Key and the default P_Key.
const (
	GSIQPN  = 1
	GSIQKey = 0x80010000
	GSIPKey = 0xFFFF
)

// BaseVersion is the only MAD base version an IB port takes.
const BaseVersion = 1

// CMClassVersion is the CM class version Linux registers (IBTA 1.2).
const CMClassVersion = 2

// Class is a management class.
type Class uint8

// Management classes (IBTA 13.4.4).
const (
	ClassSubnLID    Class = 0x01 // subnet management, LID routed (QP 0 only)
	ClassSubnAdm    Class = 0x03
	ClassPerf       Class = 0x04
	ClassBM         Class = 0x05
	ClassDevMgt     Class = 0x06
	ClassCM         Class = 0x07
	ClassSNMP       Class = 0x08
	ClassSubnDirect Class = 0x81 // subnet management, directed route (QP 0 only)
)

var classNames = map[Class]string{
	ClassSubnLID: "SubnMgt", ClassSubnAdm: "SubnAdm", ClassPerf: "Perf", ClassBM: "BM",
	ClassDevMgt: "DevMgt", ClassCM: "CM", ClassSNMP: "SNMP", ClassSubnDirect: "SubnMgtDR",
}

func (c Class) String() string {
	if n, ok := classNames[c]; ok {
		return n
	}
	return fmt.Sprintf("class(%#02x)", uint8(c))
}

// Method is a MAD method; bit 7 marks a response.
type Method uint8

// Methods (IBTA 13.4.5).
const (
	MethodGet         Method = 0x01
	MethodSet         Method = 0x02
	MethodSend        Method = 0x03
	MethodTrap        Method = 0x05
	MethodReport      Method = 0x06
	MethodTrapRepress Method = 0x07
	MethodGetResp     Method = 0x81
	MethodReportResp  Method = 0x86
	MethodResponse    Method = 0x80 // the response bit
)

var methodNames = map[Method]string{
	MethodGet: "Get", MethodSet: "Set", MethodSend: "Send", MethodTrap: "Trap", MethodReport: "Report",
	MethodTrapRepress: "TrapRepress", MethodGetResp: "GetResp", MethodReportResp: "ReportResp",
}

func (m Method) String() string {
	if n, ok := methodNames[m]; ok {
		return n
	}
	return fmt.Sprintf("method(%#02x)", uint8(m))
}

// IsResponse reports whether the response bit is set.
func (m Method) IsResponse() bool { return m&MethodResponse != 0 }

// Status is the MAD status field.
type Status uint16

// Status values (IBTA 13.4.7): busy, redirect, and the invalid-field code
// in bits 2-4.
const (
	StatusBusy                  Status = 0x0001
	StatusRedirect              Status = 0x0002
	StatusBadVersion            Status = 1 << 2
	StatusUnsupportedMethod     Status = 2 << 2
	StatusUnsupportedMethodAttr Status = 3 << 2
	StatusInvalidAttrValue      Status = 7 << 2
)

// AttrID is a MAD attribute.
type AttrID uint16

// Attributes of the CM class (IBTA 16.7.3) and ClassPortInfo.
const (
	AttrClassPortInfo AttrID = 0x0001
	AttrREQ           AttrID = 0x0010
	AttrMRA           AttrID = 0x0011
	AttrREJ           AttrID = 0x0012
	AttrREP           AttrID = 0x0013
	AttrRTU           AttrID = 0x0014
	AttrDREQ          AttrID = 0x0015
	AttrDREP          AttrID = 0x0016
	AttrSIDRReq       AttrID = 0x0017
	AttrSIDRRep       AttrID = 0x0018
	AttrLAP           AttrID = 0x0019
	AttrAPR           AttrID = 0x001A
)

// attrNames are the messages' short names; Wireshark's are in
// WiresharkName.
var attrNames = map[AttrID][2]string{
	AttrClassPortInfo: {"ClassPortInfo", "ClassPortInfo"},
	AttrREQ:           {"REQ", "ConnectRequest"},
	AttrMRA:           {"MRA", "MsgRcptAck"},
	AttrREJ:           {"REJ", "ConnectReject"},
	AttrREP:           {"REP", "ConnectReply"},
	AttrRTU:           {"RTU", "ReadyToUse"},
	AttrDREQ:          {"DREQ", "DisconnectRequest"},
	AttrDREP:          {"DREP", "DisconnectReply"},
	AttrSIDRReq:       {"SIDR_REQ", "ServiceIDResReq"},
	AttrSIDRRep:       {"SIDR_REP", "ServiceIDResReqResp"},
	AttrLAP:           {"LAP", "LoadAlternatePath"},
	AttrAPR:           {"APR", "AlternatePathResponse"},
}

// String returns the CM short name ("REQ", "SIDR_REP"), or the number.
func (a AttrID) String() string {
	if n, ok := attrNames[a]; ok {
		return n[0]
	}
	return fmt.Sprintf("attr(%#04x)", uint16(a))
}

// WiresharkName returns the name Wireshark's InfiniBand dissector shows
// for a CM attribute ("ConnectRequest"), or "" for one it does not know.
func (a AttrID) WiresharkName() string { return attrNames[a][1] }

// IsCM reports whether a is one of the CM class's messages (REQ..APR).
func (a AttrID) IsCM() bool { return a >= AttrREQ && a <= AttrAPR }

// GID is a 128-bit global identifier; on RoCEv2 an IPv6 address or an
// IPv4-mapped one.
type GID [16]byte

// MAD is a whole MAD as it travels in the payload of a UD SEND to QP 1:
// exactly MADLen bytes (a view into the caller's buffer).
type MAD []byte

// ParseMAD returns data as a MAD. A UD payload to QP 1 is one whole MAD:
// shorter is ErrShort, longer ErrLength (Linux's receive buffers hold one
// MAD, so rxe drops a longer payload for want of room).
func ParseMAD(data []byte) (MAD, error) {
	switch {
	case len(data) < MADLen:
		return nil, ErrShort
	case len(data) > MADLen:
		return nil, ErrLength
	}
	return MAD(data[:MADLen:MADLen]), nil
}

// Header is the MAD common header.
type Header struct {
	BaseVersion   uint8  `json:"base_version"`
	Class         Class  `json:"mgmt_class"`
	ClassVersion  uint8  `json:"class_version"`
	Method        Method `json:"method"`
	Status        Status `json:"status"`
	ClassSpecific uint16 `json:"class_specific"`
	TID           uint64 `json:"tid"`
	AttrID        AttrID `json:"attr_id"`
	Reserved      uint16 `json:"reserved"`
	AttrMod       uint32 `json:"attr_mod"`
}

// Header decodes the common header.
func (m MAD) Header() Header {
	be := binary.BigEndian
	return Header{
		BaseVersion: m[0], Class: Class(m[1]), ClassVersion: m[2], Method: Method(m[3]),
		Status: Status(be.Uint16(m[4:])), ClassSpecific: be.Uint16(m[6:]), TID: be.Uint64(m[8:]),
		AttrID: AttrID(be.Uint16(m[16:])), Reserved: be.Uint16(m[18:]), AttrMod: be.Uint32(m[20:]),
	}
}

// Put writes h into m's common header.
func (h *Header) Put(m MAD) {
	be := binary.BigEndian
	m[0], m[1], m[2], m[3] = h.BaseVersion, byte(h.Class), h.ClassVersion, byte(h.Method)
	be.PutUint16(m[4:], uint16(h.Status))
	be.PutUint16(m[6:], h.ClassSpecific)
	be.PutUint64(m[8:], h.TID)
	be.PutUint16(m[16:], uint16(h.AttrID))
	be.PutUint16(m[18:], h.Reserved)
	be.PutUint32(m[20:], h.AttrMod)
}

// Attr returns the attribute ID without decoding the rest.
func (m MAD) Attr() AttrID { return AttrID(binary.BigEndian.Uint16(m[16:])) }

// TID returns the transaction ID.
func (m MAD) TID() uint64 { return binary.BigEndian.Uint64(m[8:]) }

// Data returns the class data after the header (a view).
func (m MAD) Data() []byte { return m[HeaderLen:] }

// NewCM clears b (MADLen bytes) and writes the header of a CM message as
// ib_cm sends every one: base version 1, class CM, class version 2,
// method Send, attribute attr, the transaction ID tid and attribute
// modifier mod (ECE's, else 0).
func NewCM(b []byte, attr AttrID, tid uint64, mod uint32) MAD {
	m := MAD(b[:MADLen:MADLen])
	clear(m)
	h := Header{BaseVersion: BaseVersion, Class: ClassCM, ClassVersion: CMClassVersion, Method: MethodSend,
		TID: tid, AttrID: attr, AttrMod: mod}
	h.Put(m)
	return m
}

// Bytes is a byte field of a message (private data, ARI, additional
// information); it prints in JSON as hex.
type Bytes []byte

// MarshalText returns the bytes in hex.
func (b Bytes) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(b)), nil }
