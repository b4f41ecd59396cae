package rocev2

import "errors"

// Fields holds every value a RoCEv2 packet can carry above the UDP header.
// Only the headers the opcode carries are written; the others are ignored.
// Fields is a plain value so that a requester can keep one per QP and reuse
// it for every packet without allocating.
type Fields struct {
	Opcode Opcode
	SE     bool
	MigReq bool
	PKey   uint16
	FECN   bool
	BECN   bool
	DestQP uint32
	AckReq bool
	PSN    PSN

	// RETH
	VA   uint64
	RKey uint32
	Len  uint32
	// AETH
	Syndrome Syndrome
	MSN      uint32
	// AtomicETH (VA and RKey above)
	SwapAdd uint64
	Compare uint64
	// AtomicAckETH
	Orig uint64
	// ImmDt
	Imm uint32
	// IETH
	InvRKey uint32
	// DETH
	QKey  uint32
	SrcQP uint32
	// FETH
	Placement   uint8
	Selectivity uint8
}

var (
	errBuildOpcode  = errors.New("rocev2: build: opcode is not in the table")
	errBuildPayload = errors.New("rocev2: build: opcode carries no payload")
)

// PadFor returns the pad that rounds a payload of n bytes up to 4.
func PadFor(n int) int { return -n & 3 }

// PacketLen returns the UDP payload length of a packet of opcode op with a
// payload of n bytes: headers, payload, pad and ICRC.
func PacketLen(op Opcode, n int) int { return op.HeaderLen() + n + PadFor(n) + ICRCLen }

// AppendHeaders appends the BTH and the opcode's extended headers to b, with
// PadCnt set for a payload of payloadLen bytes, and returns the extended
// slice. The caller then appends the payload and calls AppendTrailer.
func (f *Fields) AppendHeaders(b []byte, payloadLen int) ([]byte, error) {
	op := f.Opcode
	if !op.Valid() {
		return b, errBuildOpcode
	}
	if payloadLen != 0 && !op.Is(OpPayload) {
		return b, errBuildPayload
	}
	start := len(b)
	b = grow(b, op.HeaderLen())
	h := b[start:]
	clear(h)
	bth := BTH(h)
	bth.SetOpcode(op)
	bth.SetSE(f.SE)
	bth.SetMigReq(f.MigReq)
	bth.SetPadCount(PadFor(payloadLen))
	bth.SetPKey(f.PKey)
	bth.SetFECN(f.FECN)
	bth.SetBECN(f.BECN)
	bth.SetDestQP(f.DestQP)
	bth.SetAckReq(f.AckReq)
	bth.SetPSN(f.PSN)
	in := &opTable[op]
	if in.hdrs&HdrDETH != 0 {
		d := DETH(h[in.off[kDETH]:])
		d.SetQKey(f.QKey)
		d.SetSrcQP(f.SrcQP)
	}
	if in.hdrs&HdrFETH != 0 {
		FETH(h[in.off[kFETH]:]).Set(f.Placement, f.Selectivity)
	}
	if in.hdrs&HdrRETH != 0 {
		r := RETH(h[in.off[kRETH]:])
		r.SetVA(f.VA)
		r.SetRKey(f.RKey)
		r.SetLen(f.Len)
	}
	if in.hdrs&HdrAtomicETH != 0 {
		a := AtomicETH(h[in.off[kAtomicETH]:])
		a.SetVA(f.VA)
		a.SetRKey(f.RKey)
		a.SetSwapAdd(f.SwapAdd)
		a.SetCompare(f.Compare)
	}
	if in.hdrs&HdrAETH != 0 {
		a := AETH(h[in.off[kAETH]:])
		a.SetSyndrome(f.Syndrome)
		a.SetMSN(f.MSN)
	}
	if in.hdrs&HdrAtomicAckETH != 0 {
		AtomicAckETH(h[in.off[kAtomicAckETH]:]).SetOrig(f.Orig)
	}
	if in.hdrs&HdrImmDt != 0 {
		ImmDt(h[in.off[kImmDt]:]).SetImm(f.Imm)
	}
	if in.hdrs&HdrIETH != 0 {
		IETH(h[in.off[kIETH]:]).SetRKey(f.InvRKey)
	}
	return b, nil
}

// AppendTrailer appends the zero pad for a payload of payloadLen bytes and a
// zeroed ICRC, to be filled by Flow.SealICRC or PutICRC.
func AppendTrailer(b []byte, payloadLen int) []byte {
	n := PadFor(payloadLen) + ICRCLen
	start := len(b)
	b = grow(b, n)
	clear(b[start:])
	return b
}

// Append appends a whole packet (headers, payload, pad and a zeroed ICRC) to
// b.
func (f *Fields) Append(b []byte, payload []byte) ([]byte, error) {
	b, err := f.AppendHeaders(b, len(payload))
	if err != nil {
		return b, err
	}
	b = append(b, payload...)
	return AppendTrailer(b, len(payload)), nil
}

// FieldsOf reads back every field of a parsed packet.
func FieldsOf(p *Packet) Fields {
	bth := p.BTH()
	f := Fields{
		Opcode: p.op, SE: bth.SE(), MigReq: bth.MigReq(), PKey: bth.PKey(),
		FECN: bth.FECN(), BECN: bth.BECN(), DestQP: bth.DestQP(), AckReq: bth.AckReq(), PSN: bth.PSN(),
	}
	if h := p.DETH(); h != nil {
		f.QKey, f.SrcQP = h.QKey(), h.SrcQP()
	}
	if h := p.FETH(); h != nil {
		f.Placement, f.Selectivity = h.PlacementType(), h.SelectivityLevel()
	}
	if h := p.RETH(); h != nil {
		f.VA, f.RKey, f.Len = h.VA(), h.RKey(), h.Len()
	}
	if h := p.AtomicETH(); h != nil {
		f.VA, f.RKey, f.SwapAdd, f.Compare = h.VA(), h.RKey(), h.SwapAdd(), h.Compare()
	}
	if h := p.AETH(); h != nil {
		f.Syndrome, f.MSN = h.Syndrome(), h.MSN()
	}
	if h := p.AtomicAckETH(); h != nil {
		f.Orig = h.Orig()
	}
	if h := p.ImmDt(); h != nil {
		f.Imm = h.Imm()
	}
	if h := p.IETH(); h != nil {
		f.InvRKey = h.RKey()
	}
	return f
}

// grow extends b by n bytes, reallocating only when its capacity is short.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*cap(b)+n)
	copy(nb, b)
	return nb
}
