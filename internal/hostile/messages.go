package hostile

import (
	"encoding/binary"
)

// Message is one datagram as a receiver's kernel might report it, every
// field from fuzz input: a length that may lie about the data, a sender
// address of any family and length, control messages (a GRO segment size,
// or garbage), flags such as MSG_TRUNC. Seal asks the caller to give the
// packet a valid ICRC for its flow, so that it gets past the ICRC check to
// the QP; Aim, to point it at the Target's QP.
type Message struct {
	Data    []byte
	Len     int // the length reported; -1: len(Data)
	Family  uint16
	Addr    []byte // sockaddr bytes after the family (port, address, ...)
	NameLen int    // the sockaddr length reported; -1: the family's size
	Control []byte
	CtlLen  int // the control length reported; -1: len(Control)
	Flags   uint32
	GRO     int // a GRO segment size to report (0: none), if Control is empty
	Seal    bool
	Aim     bool
}

// MaxMessages bounds what one fuzz input turns into.
const MaxMessages = 64

// Messages decodes fuzz input into a batch. Its shape: a sequence of
// records, each a one-byte selector followed by what it selects; input
// that runs out ends the batch (so every input is a valid batch, possibly
// empty). Sizes are bounded, never taken blind from the input.
func Messages(in []byte) []Message {
	var out []Message
	next := func(n int) []byte {
		n = min(n, len(in))
		b := in[:n]
		in = in[n:]
		return b
	}
	u8 := func() int {
		b := next(1)
		if len(b) == 0 {
			return 0
		}
		return int(b[0])
	}
	u16 := func() int {
		b := next(2)
		if len(b) < 2 {
			return 0
		}
		return int(binary.BigEndian.Uint16(b))
	}
	for len(in) > 0 && len(out) < MaxMessages {
		sel := u8()
		m := Message{Len: -1, NameLen: -1, CtlLen: -1, Family: 2 /* AF_INET */}
		m.Data = next(u16() % 9000)
		m.Seal = sel&0x01 != 0
		m.Aim = sel&0x02 != 0
		if sel&0x04 != 0 { // a length that lies
			m.Len = u16() * 2
		}
		if sel&0x08 != 0 { // a GRO segment size
			m.GRO = u16()
		}
		if sel&0x10 != 0 { // a sender of another family or length
			m.Family = uint16(u8())
			m.NameLen = u8()
		}
		if sel&0x20 != 0 { // raw control bytes and a reported length
			m.Control = next(u8())
			m.CtlLen = u8()
		}
		if sel&0x40 != 0 {
			m.Flags = uint32(u16()) << 4 // MSG_TRUNC is 0x20, MSG_CTRUNC 0x08
		}
		if sel&0x80 != 0 {
			m.Addr = next(u8() % 32)
		}
		out = append(out, m)
	}
	return out
}
