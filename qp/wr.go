package qp

import (
	"github.com/goroce/goroce/cq"
)

// WROpcode is a send work request opcode, numbered like ibv_wr_opcode.
type WROpcode uint8

//go:generate stringer -type WROpcode -linecomment

const (
	WRRDMAWrite        WROpcode = 0 // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm WROpcode = 1 // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend             WROpcode = 2 // IBV_WR_SEND
	WRSendWithImm      WROpcode = 3 // IBV_WR_SEND_WITH_IMM
	WRRDMARead         WROpcode = 4 // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp  WROpcode = 5 // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAdd   WROpcode = 6 // IBV_WR_ATOMIC_FETCH_AND_ADD
	WRLocalInv         WROpcode = 7 // IBV_WR_LOCAL_INV
	WRSendWithInv      WROpcode = 9 // IBV_WR_SEND_WITH_INV
)

func (o WROpcode) isSend() bool {
	return o == WRSend || o == WRSendWithImm || o == WRSendWithInv
}
func (o WROpcode) isWrite() bool  { return o == WRRDMAWrite || o == WRRDMAWriteWithImm }
func (o WROpcode) isAtomic() bool { return o == WRAtomicCmpAndSwp || o == WRAtomicFetchAdd }

// isReadLike reports whether the WR needs an initiator (ORD) credit and
// completes on a response rather than an ACK.
func (o WROpcode) isReadLike() bool { return o == WRRDMARead || o.isAtomic() }

func (o WROpcode) wcOpcode() cq.Opcode {
	switch {
	case o.isSend():
		return cq.OpSend
	case o.isWrite():
		return cq.OpRDMAWrite
	case o == WRRDMARead:
		return cq.OpRDMARead
	case o == WRAtomicCmpAndSwp:
		return cq.OpCompSwap
	case o == WRAtomicFetchAdd:
		return cq.OpFetchAdd
	case o == WRLocalInv:
		return cq.OpLocalInv
	}
	return cq.OpSend
}

// SendFlags are send work request flags, numbered like ibv_send_flags.
type SendFlags uint8

const (
	SendFence     SendFlags = 1 << 0 // wait for prior READ/atomic WRs to complete
	SendSignaled  SendFlags = 1 << 1 // generate a completion on success
	SendSolicited SendFlags = 1 << 2 // set the solicited event bit on the message
	SendInline    SendFlags = 1 << 3 // the data is in SendWR.Inline, copied at post
)

// SGE is one scatter/gather element: Length bytes at virtual address Addr of
// the memory region whose local key is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request (ibv_send_wr).
type SendWR struct {
	WRID   uint64
	Entry  cq.Entry // completion handler (ib_cqe); optional
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE
	// Inline is the payload of a SendInline request (at most the QP's
	// MaxInlineData bytes); it is copied when the request is posted.
	Inline []byte
	// Imm is the immediate data (WITH_IMM) or the rkey to invalidate
	// (SEND_WITH_INV, LOCAL_INV).
	Imm uint32
	// RemoteAddr and RKey name the remote buffer of RDMA and atomic ops.
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd is the compare value of CmpSwap or the addend of FetchAdd;
	// Swap is the swap value of CmpSwap.
	CompareAdd uint64
	Swap       uint64
	// AH, RemoteQPN and RemoteQKey address a UD send (wr.ud). A Q_Key with
	// its high bit set stands for the QP's own Q_Key (IBTA 10.2.5).
	AH         *AddressHandle
	RemoteQPN  uint32
	RemoteQKey uint32
}

// RecvWR is a receive work request (ibv_recv_wr).
type RecvWR struct {
	WRID  uint64
	Entry cq.Entry
	SGL   []SGE
}
