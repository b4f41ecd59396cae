package pcap

import (
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/goroce/goroce/rocev2"
)

// extLayer is what every extended-header layer implements.
type extLayer interface {
	gopacket.DecodingLayer
	gopacket.Layer
	setOpcode(op rocev2.Opcode, dqpn uint32)
	linkBTH(b *BTH)
}

// extCtx tells an extended header which opcode it belongs to: what follows
// a RETH (ImmDt or payload) depends on the opcode, not on the RETH itself.
// decodeBTH sets the opcode directly; in a DecodingLayers set the header
// reads it from the linked BTH decoded just before it.
type extCtx struct {
	op    rocev2.Opcode
	dqpn  uint32 // the destination QP: QP 1's payload is a MAD
	known bool
	bth   *BTH
}

func (c *extCtx) setOpcode(op rocev2.Opcode, dqpn uint32) { c.op, c.dqpn, c.known = op, dqpn, true }
func (c *extCtx) linkBTH(b *BTH)                          { c.bth = b }

// reset returns the context for a new decode: the link stays, the opcode is
// the linked BTH's (if any).
func (c extCtx) reset() extCtx {
	if c.bth != nil {
		return extCtx{op: c.bth.Opcode, dqpn: c.bth.DestQP, known: true, bth: c.bth}
	}
	return extCtx{}
}

// next returns the layer after header h: the opcode's next header or the
// payload's decoder. Without an opcode (a header decoded on its own) the
// rest is plain payload.
func (c *extCtx) next(h rocev2.Headers, payload []byte) gopacket.LayerType {
	if !c.known {
		return gopacket.LayerTypePayload
	}
	return nextLayerAfter(c.op, c.dqpn, h, payload)
}

// split checks that data holds an n-byte header and points base at it.
func split(base *layers.BaseLayer, data []byte, n int, df gopacket.DecodeFeedback) ([]byte, error) {
	if len(data) < n {
		df.SetTruncated()
		return nil, rocev2.ErrHeaderTruncated
	}
	*base = layers.BaseLayer{Contents: data[:n], Payload: data[n:]}
	return data[:n], nil
}

// decodeExt is the gopacket decoder of an extended header decoded on its
// own (not reached from a BTH): it cannot know the opcode, so whatever
// follows is payload.
func decodeExt[T any, PT interface {
	*T
	extLayer
}](data []byte, p gopacket.PacketBuilder) error {
	e := PT(new(T))
	if err := e.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(e)
	return p.NextDecoder(e.NextLayerType())
}

// DETH is the Datagram Extended Transport Header of UD packets.
type DETH struct {
	layers.BaseLayer
	extCtx
	// QKey is the 'Queue Key' the receiving UD QP checks.
	QKey uint32
	// Reserved is the reserved byte 4.
	Reserved uint8
	// SrcQP is the 24-bit 'Source QP' of the sender.
	SrcQP uint32
}

// LayerType returns LayerTypeDETH.
func (h *DETH) LayerType() gopacket.LayerType { return LayerTypeDETH }

// CanDecode returns LayerTypeDETH.
func (h *DETH) CanDecode() gopacket.LayerClass { return LayerTypeDETH }

// NextLayerType returns the next extended header or the payload's decoder.
func (h *DETH) NextLayerType() gopacket.LayerType { return h.next(rocev2.HdrDETH, h.Payload) }

// DecodeFromBytes decodes a DETH from the start of data.
func (h *DETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*h = DETH{extCtx: h.extCtx.reset()}
	v, err := split(&h.BaseLayer, data, rocev2.DETHLen, df)
	if err != nil {
		return err
	}
	d := rocev2.DETH(v)
	h.QKey, h.Reserved, h.SrcQP = d.QKey(), v[4], d.SrcQP()
	return nil
}

// SerializeTo prepends the DETH.
func (h *DETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	v, err := b.PrependBytes(rocev2.DETHLen)
	if err != nil {
		return err
	}
	d := rocev2.DETH(v)
	d.SetQKey(h.QKey)
	d.SetSrcQP(h.SrcQP)
	v[4] = h.Reserved
	return nil
}

// FETH is the Flush Extended Transport Header of RC FLUSH.
type FETH struct {
	layers.BaseLayer
	extCtx
	// PlacementType is the 4-bit 'Placement Type' (global visibility, persistence).
	PlacementType uint8
	// SelectivityLevel is the 2-bit 'Selectivity Level' (memory region or range).
	SelectivityLevel uint8
}

// LayerType returns LayerTypeFETH.
func (h *FETH) LayerType() gopacket.LayerType { return LayerTypeFETH }

// CanDecode returns LayerTypeFETH.
func (h *FETH) CanDecode() gopacket.LayerClass { return LayerTypeFETH }

// NextLayerType returns the next extended header (RETH) or the payload's decoder.
func (h *FETH) NextLayerType() gopacket.LayerType { return h.next(rocev2.HdrFETH, h.Payload) }

// DecodeFromBytes decodes a FETH from the start of data.
func (h *FETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*h = FETH{extCtx: h.extCtx.reset()}
	v, err := split(&h.BaseLayer, data, rocev2.FETHLen, df)
	if err != nil {
		return err
	}
	f := rocev2.FETH(v)
	h.PlacementType, h.SelectivityLevel = f.PlacementType(), f.SelectivityLevel()
	return nil
}

// SerializeTo prepends the FETH with its reserved bits zero.
func (h *FETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	v, err := b.PrependBytes(rocev2.FETHLen)
	if err != nil {
		return err
	}
	rocev2.FETH(v).Set(h.PlacementType, h.SelectivityLevel)
	return nil
}

// RETH is the RDMA Extended Transport Header: the remote buffer of an RDMA
// WRITE (FIRST/ONLY), READ request, FLUSH or ATOMIC WRITE.
type RETH struct {
	layers.BaseLayer
	extCtx
	// VA is the 'Virtual Address' of the remote buffer.
	VA uint64
	// RKey is the 'R_Key' of the remote memory region.
	RKey uint32
	// DMALength is the 'DMA Length': the length of the whole message.
	DMALength uint32
}

// LayerType returns LayerTypeRETH.
func (h *RETH) LayerType() gopacket.LayerType { return LayerTypeRETH }

// CanDecode returns LayerTypeRETH.
func (h *RETH) CanDecode() gopacket.LayerClass { return LayerTypeRETH }

// NextLayerType returns ImmDt for WRITE_ONLY_WITH_IMMEDIATE, else the payload's decoder.
func (h *RETH) NextLayerType() gopacket.LayerType { return h.next(rocev2.HdrRETH, h.Payload) }

// DecodeFromBytes decodes a RETH from the start of data.
func (h *RETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*h = RETH{extCtx: h.extCtx.reset()}
	v, err := split(&h.BaseLayer, data, rocev2.RETHLen, df)
	if err != nil {
		return err
	}
	r := rocev2.RETH(v)
	h.VA, h.RKey, h.DMALength = r.VA(), r.RKey(), r.Len()
	return nil
}

// SerializeTo prepends the RETH.
func (h *RETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	v, err := b.PrependBytes(rocev2.RETHLen)
	if err != nil {
		return err
	}
	r := rocev2.RETH(v)
	r.SetVA(h.VA)
	r.SetRKey(h.RKey)
	r.SetLen(h.DMALength)
	return nil
}

// AtomicETH is the Atomic Extended Transport Header of CmpSwap and FetchAdd.
type AtomicETH struct {
	layers.BaseLayer
	extCtx
	// VA is the 'Virtual Address' of the 8-byte remote operand.
	VA uint64
	// RKey is the 'R_Key' of the remote memory region.
	RKey uint32
	// SwapAdd is the 'Swap Data' of CmpSwap or the 'Add Data' of FetchAdd.
	SwapAdd uint64
	// Compare is the 'Compare Data' of CmpSwap.
	Compare uint64
}

// LayerType returns LayerTypeAtomicETH.
func (h *AtomicETH) LayerType() gopacket.LayerType { return LayerTypeAtomicETH }

// CanDecode returns LayerTypeAtomicETH.
func (h *AtomicETH) CanDecode() gopacket.LayerClass { return LayerTypeAtomicETH }

// NextLayerType returns the payload's decoder (atomics carry none).
func (h *AtomicETH) NextLayerType() gopacket.LayerType {
	return h.next(rocev2.HdrAtomicETH, h.Payload)
}

// DecodeFromBytes decodes an AtomicETH from the start of data.
func (h *AtomicETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*h = AtomicETH{extCtx: h.extCtx.reset()}
	v, err := split(&h.BaseLayer, data, rocev2.AtomicETHLen, df)
	if err != nil {
		return err
	}
	a := rocev2.AtomicETH(v)
	h.VA, h.RKey, h.SwapAdd, h.Compare = a.VA(), a.RKey(), a.SwapAdd(), a.Compare()
	return nil
}

// SerializeTo prepends the AtomicETH.
func (h *AtomicETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	v, err := b.PrependBytes(rocev2.AtomicETHLen)
	if err != nil {
		return err
	}
	a := rocev2.AtomicETH(v)
	a.SetVA(h.VA)
	a.SetRKey(h.RKey)
	a.SetSwapAdd(h.SwapAdd)
	a.SetCompare(h.Compare)
	return nil
}

// AETH is the ACK Extended Transport Header of acknowledgements and READ
// responses.
type AETH struct {
	layers.BaseLayer
	extCtx
	// Syndrome says ACK (with credit code), RNR NAK (with timer) or NAK (with code).
	Syndrome rocev2.Syndrome
	// MSN is the 24-bit 'Message Sequence Number' of the responder.
	MSN uint32
}

// Kind returns whether the AETH is an ACK, an RNR NAK or a NAK.
func (h *AETH) Kind() rocev2.SyndromeKind { return h.Syndrome.Kind() }

// Code returns the syndrome's low five bits: credit, RNR timer or NAK code.
func (h *AETH) Code() uint8 { return h.Syndrome.Code() }

// LayerType returns LayerTypeAETH.
func (h *AETH) LayerType() gopacket.LayerType { return LayerTypeAETH }

// CanDecode returns LayerTypeAETH.
func (h *AETH) CanDecode() gopacket.LayerClass { return LayerTypeAETH }

// NextLayerType returns AtomicAckETH for an atomic ACK, else the payload's decoder.
func (h *AETH) NextLayerType() gopacket.LayerType { return h.next(rocev2.HdrAETH, h.Payload) }

// DecodeFromBytes decodes an AETH from the start of data.
func (h *AETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*h = AETH{extCtx: h.extCtx.reset()}
	v, err := split(&h.BaseLayer, data, rocev2.AETHLen, df)
	if err != nil {
		return err
	}
	a := rocev2.AETH(v)
	h.Syndrome, h.MSN = a.Syndrome(), a.MSN()
	return nil
}

// SerializeTo prepends the AETH.
func (h *AETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	v, err := b.PrependBytes(rocev2.AETHLen)
	if err != nil {
		return err
	}
	a := rocev2.AETH(v)
	a.SetSyndrome(h.Syndrome)
	a.SetMSN(h.MSN)
	return nil
}

// AtomicAckETH is the Atomic Acknowledge Extended Transport Header.
type AtomicAckETH struct {
	layers.BaseLayer
	extCtx
	// Orig is the 'Original Remote Data': the operand before the atomic ran.
	Orig uint64
}

// LayerType returns LayerTypeAtomicAckETH.
func (h *AtomicAckETH) LayerType() gopacket.LayerType { return LayerTypeAtomicAckETH }

// CanDecode returns LayerTypeAtomicAckETH.
func (h *AtomicAckETH) CanDecode() gopacket.LayerClass { return LayerTypeAtomicAckETH }

// NextLayerType returns the payload's decoder (atomic ACKs carry none).
func (h *AtomicAckETH) NextLayerType() gopacket.LayerType {
	return h.next(rocev2.HdrAtomicAckETH, h.Payload)
}

// DecodeFromBytes decodes an AtomicAckETH from the start of data.
func (h *AtomicAckETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*h = AtomicAckETH{extCtx: h.extCtx.reset()}
	v, err := split(&h.BaseLayer, data, rocev2.AtomicAckETHLen, df)
	if err != nil {
		return err
	}
	h.Orig = rocev2.AtomicAckETH(v).Orig()
	return nil
}

// SerializeTo prepends the AtomicAckETH.
func (h *AtomicAckETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	v, err := b.PrependBytes(rocev2.AtomicAckETHLen)
	if err != nil {
		return err
	}
	rocev2.AtomicAckETH(v).SetOrig(h.Orig)
	return nil
}

// ImmDt is the Immediate Data header of the *_WITH_IMMEDIATE opcodes.
type ImmDt struct {
	layers.BaseLayer
	extCtx
	// Imm is the 32 opaque bits delivered to the receiver, read big-endian.
	Imm uint32
}

// LayerType returns LayerTypeImmDt.
func (h *ImmDt) LayerType() gopacket.LayerType { return LayerTypeImmDt }

// CanDecode returns LayerTypeImmDt.
func (h *ImmDt) CanDecode() gopacket.LayerClass { return LayerTypeImmDt }

// NextLayerType returns the payload's decoder.
func (h *ImmDt) NextLayerType() gopacket.LayerType { return h.next(rocev2.HdrImmDt, h.Payload) }

// DecodeFromBytes decodes an ImmDt from the start of data.
func (h *ImmDt) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*h = ImmDt{extCtx: h.extCtx.reset()}
	v, err := split(&h.BaseLayer, data, rocev2.ImmDtLen, df)
	if err != nil {
		return err
	}
	h.Imm = rocev2.ImmDt(v).Imm()
	return nil
}

// SerializeTo prepends the ImmDt.
func (h *ImmDt) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	v, err := b.PrependBytes(rocev2.ImmDtLen)
	if err != nil {
		return err
	}
	rocev2.ImmDt(v).SetImm(h.Imm)
	return nil
}

// IETH is the Invalidate Extended Transport Header of SEND with Invalidate.
type IETH struct {
	layers.BaseLayer
	extCtx
	// RKey is the R_Key the responder invalidates.
	RKey uint32
}

// LayerType returns LayerTypeIETH.
func (h *IETH) LayerType() gopacket.LayerType { return LayerTypeIETH }

// CanDecode returns LayerTypeIETH.
func (h *IETH) CanDecode() gopacket.LayerClass { return LayerTypeIETH }

// NextLayerType returns the payload's decoder.
func (h *IETH) NextLayerType() gopacket.LayerType { return h.next(rocev2.HdrIETH, h.Payload) }

// DecodeFromBytes decodes an IETH from the start of data.
func (h *IETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*h = IETH{extCtx: h.extCtx.reset()}
	v, err := split(&h.BaseLayer, data, rocev2.IETHLen, df)
	if err != nil {
		return err
	}
	h.RKey = rocev2.IETH(v).RKey()
	return nil
}

// SerializeTo prepends the IETH.
func (h *IETH) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	v, err := b.PrependBytes(rocev2.IETHLen)
	if err != nil {
		return err
	}
	rocev2.IETH(v).SetRKey(h.RKey)
	return nil
}

// CNPPad is the 16 reserved bytes that follow the BTH of a RoCEv2
// congestion notification packet (opcode 0x81). It has no fields; its
// LayerContents are the bytes as received.
type CNPPad struct {
	layers.BaseLayer
	extCtx
}

// LayerType returns LayerTypeCNPPad.
func (h *CNPPad) LayerType() gopacket.LayerType { return LayerTypeCNPPad }

// CanDecode returns LayerTypeCNPPad.
func (h *CNPPad) CanDecode() gopacket.LayerClass { return LayerTypeCNPPad }

// NextLayerType returns the payload's decoder (a CNP carries none).
func (h *CNPPad) NextLayerType() gopacket.LayerType { return h.next(rocev2.HdrCNPPad, h.Payload) }

// DecodeFromBytes decodes the CNP pad from the start of data.
func (h *CNPPad) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*h = CNPPad{extCtx: h.extCtx.reset()}
	_, err := split(&h.BaseLayer, data, rocev2.CNPPadLen, df)
	return err
}

// SerializeTo prepends 16 zero bytes.
func (h *CNPPad) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	v, err := b.PrependBytes(rocev2.CNPPadLen)
	if err != nil {
		return err
	}
	clear(v)
	return nil
}
