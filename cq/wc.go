package cq

import "strconv"

// Status is a work completion status, numbered like ibv_wc_status.
type Status uint8

const (
	Success          Status = 0
	LocLenErr        Status = 1
	LocQPOpErr       Status = 2
	LocEECOpErr      Status = 3
	LocProtErr       Status = 4
	WRFlushErr       Status = 5
	MWBindErr        Status = 6
	BadRespErr       Status = 7
	LocAccessErr     Status = 8
	RemInvReqErr     Status = 9
	RemAccessErr     Status = 10
	RemOpErr         Status = 11
	RetryExcErr      Status = 12
	RNRRetryExcErr   Status = 13
	LocRDDViolErr    Status = 14
	RemInvRDReqErr   Status = 15
	RemAbortErr      Status = 16
	InvEECNErr       Status = 17
	InvEECStateErr   Status = 18
	FatalErr         Status = 19
	RespTimeoutErr   Status = 20
	GeneralErr       Status = 21
	TMErr            Status = 22
	TMRndvIncomplete Status = 23
)

var statusNames = [...]string{
	"IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR", "IBV_WC_LOC_EEC_OP_ERR",
	"IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR", "IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR",
	"IBV_WC_LOC_ACCESS_ERR", "IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR", "IBV_WC_REM_OP_ERR",
	"IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR", "IBV_WC_LOC_RDD_VIOL_ERR",
	"IBV_WC_REM_INV_RD_REQ_ERR", "IBV_WC_REM_ABORT_ERR", "IBV_WC_INV_EECN_ERR",
	"IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR", "IBV_WC_RESP_TIMEOUT_ERR", "IBV_WC_GENERAL_ERR",
	"IBV_WC_TM_ERR", "IBV_WC_TM_RNDV_INCOMPLETE",
}

// String returns the IBV_WC_* spelling users grep for.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "IBV_WC_STATUS(" + strconv.Itoa(int(s)) + ")"
}

// statusTexts are libibverbs' ibv_wc_status_str, which rdma-core's tools
// print ("Failed status remote invalid request error (9)").
var statusTexts = [...]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error", "bad response error",
	"local access error", "remote invalid request error", "remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation error",
	"remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
	"TM error", "TM software rendezvous",
}

// Text returns the status as ibv_wc_status_str words it ("unknown" past
// the last).
func (s Status) Text() string {
	if int(s) < len(statusTexts) {
		return statusTexts[s]
	}
	return "unknown"
}

// OK reports whether the status is Success.
func (s Status) OK() bool { return s == Success }

// Opcode is a work completion opcode, numbered like ibv_wc_opcode.
// Receive-side opcodes have bit 7 set.
type Opcode uint8

//go:generate stringer -type Opcode -linecomment

const (
	OpSend            Opcode = 0   // IBV_WC_SEND
	OpRDMAWrite       Opcode = 1   // IBV_WC_RDMA_WRITE
	OpRDMARead        Opcode = 2   // IBV_WC_RDMA_READ
	OpCompSwap        Opcode = 3   // IBV_WC_COMP_SWAP
	OpFetchAdd        Opcode = 4   // IBV_WC_FETCH_ADD
	OpBindMW          Opcode = 5   // IBV_WC_BIND_MW
	OpLocalInv        Opcode = 6   // IBV_WC_LOCAL_INV
	OpTSO             Opcode = 7   // IBV_WC_TSO
	OpFlush           Opcode = 8   // IBV_WC_FLUSH
	OpAtomicWrite     Opcode = 9   // IBV_WC_ATOMIC_WRITE
	OpRecv            Opcode = 128 // IBV_WC_RECV
	OpRecvRDMAWithImm Opcode = 129 // IBV_WC_RECV_RDMA_WITH_IMM
)

// IsRecv reports whether the opcode is a receive-side completion.
func (o Opcode) IsRecv() bool { return o&0x80 != 0 }

// Flags are work completion flags, numbered like ibv_wc_flags.
type Flags uint8

const (
	WithGRH Flags = 1 << 0 // a 40-byte GRH area precedes the payload (UD)
	WithImm Flags = 1 << 1 // Imm holds immediate data
	WithInv Flags = 1 << 2 // Imm holds the invalidated rkey
)

// Entry is a completion entry that carries its own handler (the kernel's
// ib_cqe): a work request names an Entry, and when it completes the CQ's
// poller calls Done with the completion, so the owner finds its context
// without any wr_id lookup. Embed an Entry-implementing value in the
// per-request context.
type Entry interface {
	Done(wc *WC)
}

// WC is a work completion, with the fields of ibv_wc. It is a flat value so
// that Poll can fill a caller's slice without allocating. Only WRID, Entry,
// Status, Opcode and QPNum are meaningful in an error completion.
type WC struct {
	WRID    uint64 // the work request's wr_id
	Entry   Entry  // the work request's completion entry, if it named one
	Status  Status
	Opcode  Opcode
	Flags   Flags
	ByteLen uint32 // bytes transferred (receives: bytes placed)
	Imm     uint32 // immediate data (host order) or invalidated rkey
	QPNum   uint32 // the local QP
	SrcQP   uint32 // the remote QP (UD receives)
}
