package rocev2

import "encoding/binary"

// ICRCLen is the size of the invariant CRC trailer.
const ICRCLen = 4

// Packet is a parsed RoCEv2 packet: a UDP payload from the BTH to the ICRC.
// Every accessor returns a view into the buffer handed to Parse; nothing is
// copied, and Parse does not allocate. A Packet is reused across receives.
//
//	+-----+-----------------+---------------+-----+------+
//	| BTH | extended hdrs   | payload       | pad | ICRC |
//	+-----+-----------------+---------------+-----+------+
//	 <------ HeaderLen ----> <- PayloadLen ->      <- 4 ->
type Packet struct {
	buf    []byte // BTH .. ICRC
	op     Opcode
	hdrLen int
	payLen int // without pad
}

// Parse validates b as a RoCEv2 UDP payload and points p into it. It checks,
// in order: room for a BTH and ICRC, the opcode against the table (before any
// arithmetic that depends on it), TVer, the opcode's header length, the pad
// count and payload rules. The ICRC is not checked here: it needs the IP and
// UDP headers (see Flow.VerifyICRC and VerifyFrameICRC).
func (p *Packet) Parse(b []byte) error {
	*p = Packet{}
	if len(b) < BTHLen+ICRCLen {
		return ErrShort
	}
	op := Opcode(b[bthOpcode])
	if !op.Valid() {
		return ErrUnknownOpcode
	}
	if BTH(b).TVer() != 0 {
		return ErrTVer
	}
	hl := op.HeaderLen()
	if len(b) < hl+ICRCLen {
		return ErrHeaderTruncated
	}
	rest := len(b) - hl - ICRCLen // payload + pad
	pad := BTH(b).PadCount()
	if !op.Is(OpPayload) {
		if rest != 0 {
			return ErrUnexpectedPayload
		}
		if pad != 0 {
			return ErrPadCount
		}
	} else if pad > rest {
		return ErrPadCount
	}
	p.buf, p.op, p.hdrLen, p.payLen = b, op, hl, rest-pad
	return nil
}

// Bytes returns the whole packet, BTH to ICRC.
func (p *Packet) Bytes() []byte { return p.buf }

// Opcode returns the BTH opcode.
func (p *Packet) Opcode() Opcode { return p.op }

// BTH returns the base transport header.
func (p *Packet) BTH() BTH { return BTH(p.buf[:BTHLen]) }

// HeaderLen returns the length of the BTH and the extended headers.
func (p *Packet) HeaderLen() int { return p.hdrLen }

// Payload returns the payload without pad.
func (p *Packet) Payload() []byte { return p.buf[p.hdrLen : p.hdrLen+p.payLen] }

// Pad returns the pad bytes after the payload.
func (p *Packet) Pad() []byte { return p.buf[p.hdrLen+p.payLen : len(p.buf)-ICRCLen] }

// ICRC returns the ICRC as received (the trailer read least-significant byte first).
func (p *Packet) ICRC() uint32 { return binary.LittleEndian.Uint32(p.buf[len(p.buf)-ICRCLen:]) }

// Covered returns the bytes the ICRC covers after the BTH: BTH to the end of the pad.
func (p *Packet) Covered() []byte { return p.buf[:len(p.buf)-ICRCLen] }

// ext returns header k's bytes, or nil when the opcode does not carry it.
func (p *Packet) ext(k int) []byte {
	in := &opTable[p.op]
	if in.hdrs&(1<<k) == 0 {
		return nil
	}
	off := int(in.off[k])
	return p.buf[off : off+headerSizes[k]]
}

// RETH returns the RDMA extended header, or nil if the opcode has none.
func (p *Packet) RETH() RETH { return p.ext(kRETH) }

// AETH returns the ACK extended header, or nil.
func (p *Packet) AETH() AETH { return p.ext(kAETH) }

// AtomicETH returns the atomic extended header, or nil.
func (p *Packet) AtomicETH() AtomicETH { return p.ext(kAtomicETH) }

// AtomicAckETH returns the atomic acknowledge header, or nil.
func (p *Packet) AtomicAckETH() AtomicAckETH { return p.ext(kAtomicAckETH) }

// ImmDt returns the immediate data header, or nil.
func (p *Packet) ImmDt() ImmDt { return p.ext(kImmDt) }

// IETH returns the invalidate header, or nil.
func (p *Packet) IETH() IETH { return p.ext(kIETH) }

// DETH returns the datagram header, or nil.
func (p *Packet) DETH() DETH { return p.ext(kDETH) }

// FETH returns the flush header, or nil.
func (p *Packet) FETH() FETH { return p.ext(kFETH) }
