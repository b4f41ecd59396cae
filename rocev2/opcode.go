package rocev2

// Opcode is the BTH opcode: bits 7..5 select the transport (RC, UC, UD, CNP),
// bits 4..0 the operation.
type Opcode uint8

// Transport service selected by the top three opcode bits.
type Transport uint8

const (
	TransportRC  Transport = 0x00
	TransportUC  Transport = 0x20
	TransportRD  Transport = 0x40
	TransportUD  Transport = 0x60
	TransportCNP Transport = 0x80
	TransportXRC Transport = 0xA0
)

func (t Transport) String() string {
	switch t {
	case TransportRC:
		return "RC"
	case TransportUC:
		return "UC"
	case TransportRD:
		return "RD"
	case TransportUD:
		return "UD"
	case TransportCNP:
		return "CNP"
	case TransportXRC:
		return "XRC"
	}
	return "vendor"
}

// The opcodes goroce speaks. RD and XRC are not implemented and are rejected
// by the parser like any other opcode missing from the table.
const (
	RCSendFirst          Opcode = 0x00
	RCSendMiddle         Opcode = 0x01
	RCSendLast           Opcode = 0x02
	RCSendLastImm        Opcode = 0x03
	RCSendOnly           Opcode = 0x04
	RCSendOnlyImm        Opcode = 0x05
	RCWriteFirst         Opcode = 0x06
	RCWriteMiddle        Opcode = 0x07
	RCWriteLast          Opcode = 0x08
	RCWriteLastImm       Opcode = 0x09
	RCWriteOnly          Opcode = 0x0A
	RCWriteOnlyImm       Opcode = 0x0B
	RCReadRequest        Opcode = 0x0C
	RCReadResponseFirst  Opcode = 0x0D
	RCReadResponseMiddle Opcode = 0x0E
	RCReadResponseLast   Opcode = 0x0F
	RCReadResponseOnly   Opcode = 0x10
	RCAcknowledge        Opcode = 0x11
	RCAtomicAcknowledge  Opcode = 0x12
	RCCompareSwap        Opcode = 0x13
	RCFetchAdd           Opcode = 0x14
	RCSendLastInv        Opcode = 0x16
	RCSendOnlyInv        Opcode = 0x17
	RCFlush              Opcode = 0x1C
	RCAtomicWrite        Opcode = 0x1D
	UCSendFirst          Opcode = 0x20
	UCSendMiddle         Opcode = 0x21
	UCSendLast           Opcode = 0x22
	UCSendLastImm        Opcode = 0x23
	UCSendOnly           Opcode = 0x24
	UCSendOnlyImm        Opcode = 0x25
	UCWriteFirst         Opcode = 0x26
	UCWriteMiddle        Opcode = 0x27
	UCWriteLast          Opcode = 0x28
	UCWriteLastImm       Opcode = 0x29
	UCWriteOnly          Opcode = 0x2A
	UCWriteOnlyImm       Opcode = 0x2B
	UDSendOnly           Opcode = 0x64
	UDSendOnlyImm        Opcode = 0x65
	CNP                  Opcode = 0x81
)

// Headers is a set of extended transport headers.
type Headers uint16

// Indices of the extended headers, in the order in which they follow the BTH.
const (
	kDETH = iota
	kFETH
	kRETH
	kAtomicETH
	kAETH
	kAtomicAckETH
	kImmDt
	kIETH
	kCNPPad
	numHeaderKinds
)

// Extended headers.
const (
	HdrDETH         Headers = 1 << kDETH
	HdrFETH         Headers = 1 << kFETH
	HdrRETH         Headers = 1 << kRETH
	HdrAtomicETH    Headers = 1 << kAtomicETH
	HdrAETH         Headers = 1 << kAETH
	HdrAtomicAckETH Headers = 1 << kAtomicAckETH
	HdrImmDt        Headers = 1 << kImmDt
	HdrIETH         Headers = 1 << kIETH
	HdrCNPPad       Headers = 1 << kCNPPad // the 16 reserved bytes of a RoCEv2 CNP
)

// headerSizes gives each extended header's length, in wire order.
var headerSizes = [numHeaderKinds]int{
	DETHLen, FETHLen, RETHLen, AtomicETHLen, AETHLen, AtomicAckETHLen, ImmDtLen, IETHLen, CNPPadLen,
}

// OpFlags describe what an opcode means to the transport.
type OpFlags uint16

const (
	OpFirst       OpFlags = 1 << iota // starts a message (FIRST or ONLY)
	OpLast                            // ends a message (LAST or ONLY)
	OpPayload                         // may carry payload
	OpRequest                         // sent by a requester
	OpResponse                        // sent by a responder (ACK, READ response, atomic ACK)
	OpSend                            // SEND family
	OpWrite                           // RDMA WRITE family
	OpRead                            // RDMA READ request
	OpAtomic                          // CmpSwap or FetchAdd
	OpRecvWQE                         // consumes a receive WQE (at this packet)
	OpComplete                        // a receive completion is generated at this packet
	OpFlush                           // FLUSH
	OpAtomicWrite                     // ATOMIC WRITE
	OpCNP                             // congestion notification
)

type opInfo struct {
	name   string
	hdrs   Headers
	flags  OpFlags
	hdrLen uint8                 // BTH plus extended headers
	off    [numHeaderKinds]uint8 // offset of each present header from the BTH
}

type opDef struct {
	op    Opcode
	name  string
	flags OpFlags
	hdrs  Headers
}

const (
	only     = OpFirst | OpLast
	sendReq  = OpRequest | OpSend | OpPayload
	writeReq = OpRequest | OpWrite | OpPayload
	readResp = OpResponse | OpPayload
)

// opDefs is the one table that drives both parsing and building; it follows
// the IBTA opcode list (and rxe_opcode.c) for the transports goroce speaks.
var opDefs = []opDef{
	{RCSendFirst, "RC SEND_FIRST", sendReq | OpFirst | OpRecvWQE, 0},
	{RCSendMiddle, "RC SEND_MIDDLE", sendReq, 0},
	{RCSendLast, "RC SEND_LAST", sendReq | OpLast | OpComplete, 0},
	{RCSendLastImm, "RC SEND_LAST_WITH_IMMEDIATE", sendReq | OpLast | OpComplete, HdrImmDt},
	{RCSendOnly, "RC SEND_ONLY", sendReq | only | OpRecvWQE | OpComplete, 0},
	{RCSendOnlyImm, "RC SEND_ONLY_WITH_IMMEDIATE", sendReq | only | OpRecvWQE | OpComplete, HdrImmDt},
	{RCWriteFirst, "RC RDMA_WRITE_FIRST", writeReq | OpFirst, HdrRETH},
	{RCWriteMiddle, "RC RDMA_WRITE_MIDDLE", writeReq, 0},
	{RCWriteLast, "RC RDMA_WRITE_LAST", writeReq | OpLast, 0},
	{RCWriteLastImm, "RC RDMA_WRITE_LAST_WITH_IMMEDIATE", writeReq | OpLast | OpRecvWQE | OpComplete, HdrImmDt},
	{RCWriteOnly, "RC RDMA_WRITE_ONLY", writeReq | only, HdrRETH},
	{RCWriteOnlyImm, "RC RDMA_WRITE_ONLY_WITH_IMMEDIATE", writeReq | only | OpRecvWQE | OpComplete, HdrRETH | HdrImmDt},
	{RCReadRequest, "RC RDMA_READ_REQUEST", OpRequest | OpRead | only, HdrRETH},
	{RCReadResponseFirst, "RC RDMA_READ_RESPONSE_FIRST", readResp | OpFirst, HdrAETH},
	{RCReadResponseMiddle, "RC RDMA_READ_RESPONSE_MIDDLE", readResp, 0},
	{RCReadResponseLast, "RC RDMA_READ_RESPONSE_LAST", readResp | OpLast, HdrAETH},
	{RCReadResponseOnly, "RC RDMA_READ_RESPONSE_ONLY", readResp | only, HdrAETH},
	{RCAcknowledge, "RC ACKNOWLEDGE", OpResponse | only, HdrAETH},
	{RCAtomicAcknowledge, "RC ATOMIC_ACKNOWLEDGE", OpResponse | only, HdrAETH | HdrAtomicAckETH},
	{RCCompareSwap, "RC COMPARE_SWAP", OpRequest | OpAtomic | only, HdrAtomicETH},
	{RCFetchAdd, "RC FETCH_ADD", OpRequest | OpAtomic | only, HdrAtomicETH},
	{RCSendLastInv, "RC SEND_LAST_WITH_INVALIDATE", sendReq | OpLast | OpComplete, HdrIETH},
	{RCSendOnlyInv, "RC SEND_ONLY_WITH_INVALIDATE", sendReq | only | OpRecvWQE | OpComplete, HdrIETH},
	{RCFlush, "RC FLUSH", OpRequest | OpFlush | only, HdrFETH | HdrRETH},
	{RCAtomicWrite, "RC ATOMIC_WRITE", OpRequest | OpAtomicWrite | OpPayload | only, HdrRETH},

	{UCSendFirst, "UC SEND_FIRST", sendReq | OpFirst | OpRecvWQE, 0},
	{UCSendMiddle, "UC SEND_MIDDLE", sendReq, 0},
	{UCSendLast, "UC SEND_LAST", sendReq | OpLast | OpComplete, 0},
	{UCSendLastImm, "UC SEND_LAST_WITH_IMMEDIATE", sendReq | OpLast | OpComplete, HdrImmDt},
	{UCSendOnly, "UC SEND_ONLY", sendReq | only | OpRecvWQE | OpComplete, 0},
	{UCSendOnlyImm, "UC SEND_ONLY_WITH_IMMEDIATE", sendReq | only | OpRecvWQE | OpComplete, HdrImmDt},
	{UCWriteFirst, "UC RDMA_WRITE_FIRST", writeReq | OpFirst, HdrRETH},
	{UCWriteMiddle, "UC RDMA_WRITE_MIDDLE", writeReq, 0},
	{UCWriteLast, "UC RDMA_WRITE_LAST", writeReq | OpLast, 0},
	{UCWriteLastImm, "UC RDMA_WRITE_LAST_WITH_IMMEDIATE", writeReq | OpLast | OpRecvWQE | OpComplete, HdrImmDt},
	{UCWriteOnly, "UC RDMA_WRITE_ONLY", writeReq | only, HdrRETH},
	{UCWriteOnlyImm, "UC RDMA_WRITE_ONLY_WITH_IMMEDIATE", writeReq | only | OpRecvWQE | OpComplete, HdrRETH | HdrImmDt},

	{UDSendOnly, "UD SEND_ONLY", sendReq | only | OpRecvWQE | OpComplete, HdrDETH},
	{UDSendOnlyImm, "UD SEND_ONLY_WITH_IMMEDIATE", sendReq | only | OpRecvWQE | OpComplete, HdrDETH | HdrImmDt},

	{CNP, "CNP", OpCNP | only, HdrCNPPad},
}

var opTable = buildOpTable()

func buildOpTable() (t [256]opInfo) {
	for _, d := range opDefs {
		in := opInfo{name: d.name, hdrs: d.hdrs, flags: d.flags}
		off := BTHLen
		for k := 0; k < numHeaderKinds; k++ {
			if d.hdrs&(1<<k) != 0 {
				in.off[k] = uint8(off)
				off += headerSizes[k]
			}
		}
		in.hdrLen = uint8(off)
		t[d.op] = in
	}
	return t
}

// Valid reports whether the opcode is in goroce's table. Every other accessor
// returns zero values for an invalid opcode; none indexes past the table.
func (op Opcode) Valid() bool { return opTable[op].hdrLen != 0 }

// Transport returns the transport service of the opcode.
func (op Opcode) Transport() Transport { return Transport(op & 0xE0) }

// String returns the opcode's name, e.g. "RC SEND_ONLY", or "0xNN" when unknown.
func (op Opcode) String() string {
	if n := opTable[op].name; n != "" {
		return n
	}
	const hex = "0123456789abcdef"
	return string([]byte{'0', 'x', hex[op>>4], hex[op&15]})
}

// Headers returns the set of extended headers the opcode carries.
func (op Opcode) Headers() Headers { return opTable[op].hdrs }

// Has reports whether the opcode carries header h.
func (op Opcode) Has(h Headers) bool { return opTable[op].hdrs&h != 0 }

// Is reports whether the opcode has every flag in f.
func (op Opcode) Is(f OpFlags) bool { return opTable[op].flags&f == f }

// Flags returns the opcode's flags.
func (op Opcode) Flags() OpFlags { return opTable[op].flags }

// HeaderLen returns the length of the BTH and the extended headers (0 if invalid).
func (op Opcode) HeaderLen() int { return int(opTable[op].hdrLen) }

// Offset returns the offset of header h from the start of the BTH, or -1 if
// the opcode does not carry it. h must be a single header.
func (op Opcode) Offset(h Headers) int {
	in := &opTable[op]
	if in.hdrs&h == 0 {
		return -1
	}
	for k := 0; k < numHeaderKinds; k++ {
		if h == 1<<k {
			return int(in.off[k])
		}
	}
	return -1
}

// ConsumesRecvWQE reports whether a responder takes a receive WQE at this packet.
func (op Opcode) ConsumesRecvWQE() bool { return op.Is(OpRecvWQE) }

// Position returns "FIRST", "MIDDLE", "LAST" or "ONLY" for the opcode's place
// within a message.
func (op Opcode) Position() string {
	switch f := opTable[op].flags; {
	case f&only == only:
		return "ONLY"
	case f&OpFirst != 0:
		return "FIRST"
	case f&OpLast != 0:
		return "LAST"
	}
	return "MIDDLE"
}
