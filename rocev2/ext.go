package rocev2

import "encoding/binary"

// Sizes of the extended transport headers.
const (
	DETHLen         = 8
	FETHLen         = 4
	RETHLen         = 16
	AtomicETHLen    = 28
	AETHLen         = 4
	AtomicAckETHLen = 8
	ImmDtLen        = 4
	IETHLen         = 4
	CNPPadLen       = 16
)

// RETH is a view of the RDMA Extended Transport Header: the remote buffer of
// an RDMA WRITE (FIRST/ONLY) or READ request.
//
//	0-7   virtual address
//	8-11  R_Key
//	12-15 DMA length (of the whole message)
type RETH []byte

// VA returns the 'Virtual Address' field.
func (h RETH) VA() uint64 { return binary.BigEndian.Uint64(h[0:]) }

// RKey returns the 'R_Key' field.
func (h RETH) RKey() uint32 { return binary.BigEndian.Uint32(h[8:]) }

// Len returns the 'DMA Length' field.
func (h RETH) Len() uint32 { return binary.BigEndian.Uint32(h[12:]) }

// SetVA sets the 'Virtual Address' field.
func (h RETH) SetVA(v uint64) { binary.BigEndian.PutUint64(h[0:], v) }

// SetRKey sets the 'R_Key' field.
func (h RETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(h[8:], k) }

// SetLen sets the 'DMA Length' field.
func (h RETH) SetLen(n uint32) { binary.BigEndian.PutUint32(h[12:], n) }

// AtomicETH is a view of the Atomic Extended Transport Header of a
// CmpSwap/FetchAdd request.
//
//	0-7   virtual address (8-byte aligned)
//	8-11  R_Key
//	12-19 swap data (CmpSwap) or add data (FetchAdd)
//	20-27 compare data
type AtomicETH []byte

// VA returns the 'Virtual Address' field.
func (h AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(h[0:]) }

// RKey returns the 'R_Key' field.
func (h AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(h[8:]) }

// SwapAdd returns the 'Swap (or Add) Data' field.
func (h AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(h[12:]) }

// Compare returns the 'Compare Data' field.
func (h AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(h[20:]) }

// SetVA sets the 'Virtual Address' field.
func (h AtomicETH) SetVA(v uint64) { binary.BigEndian.PutUint64(h[0:], v) }

// SetRKey sets the 'R_Key' field.
func (h AtomicETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(h[8:], k) }

// SetSwapAdd sets the 'Swap (or Add) Data' field.
func (h AtomicETH) SetSwapAdd(v uint64) { binary.BigEndian.PutUint64(h[12:], v) }

// SetCompare sets the 'Compare Data' field.
func (h AtomicETH) SetCompare(v uint64) { binary.BigEndian.PutUint64(h[20:], v) }

// AtomicAckETH is a view of the Atomic Acknowledge Extended Transport Header:
// the remote value before the atomic ran.
type AtomicAckETH []byte

// Orig returns the 'Original Remote Data' field.
func (h AtomicAckETH) Orig() uint64 { return binary.BigEndian.Uint64(h) }

// SetOrig sets the 'Original Remote Data' field.
func (h AtomicAckETH) SetOrig(v uint64) { binary.BigEndian.PutUint64(h, v) }

// DETH is a view of the Datagram Extended Transport Header (UD).
//
//	0-3 Q_Key
//	4   reserved
//	5-7 source QP
type DETH []byte

// QKey returns the 'Queue Key' field.
func (h DETH) QKey() uint32 { return binary.BigEndian.Uint32(h[0:]) }

// SrcQP returns the 24-bit 'Source QP' field.
func (h DETH) SrcQP() uint32 { return binary.BigEndian.Uint32(h[4:]) & 0xFFFFFF }

// SetQKey sets the 'Queue Key' field.
func (h DETH) SetQKey(k uint32) { binary.BigEndian.PutUint32(h[0:], k) }

// SetSrcQP sets the 'Source QP' field and clears the reserved byte.
func (h DETH) SetSrcQP(qpn uint32) { binary.BigEndian.PutUint32(h[4:], qpn&0xFFFFFF) }

// ImmDt is a view of the Immediate Data header: 32 opaque bits, delivered
// to the receiver as they were sent.
type ImmDt []byte

// Imm returns the immediate data in network byte order as a number.
func (h ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(h) }

// SetImm sets the immediate data.
func (h ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(h, v) }

// IETH is a view of the Invalidate Extended Transport Header of SEND with
// Invalidate: the R_Key to invalidate at the responder.
type IETH []byte

// RKey returns the R_Key to invalidate.
func (h IETH) RKey() uint32 { return binary.BigEndian.Uint32(h) }

// SetRKey sets the R_Key to invalidate.
func (h IETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(h, k) }

// FETH is a view of the Flush Extended Transport Header.
//
//	bits 3..0 of byte 3: placement type; bits 5..4: selectivity level
type FETH []byte

// PlacementType returns the 'Placement Type' field.
func (h FETH) PlacementType() uint8 { return h[3] & 0x0F }

// SelectivityLevel returns the 'Selectivity Level' field.
func (h FETH) SelectivityLevel() uint8 { return h[3] >> 4 & 3 }

// Set sets both fields and clears the reserved bits.
func (h FETH) Set(placement, selectivity uint8) {
	h[0], h[1], h[2] = 0, 0, 0
	h[3] = selectivity&3<<4 | placement&0x0F
}
