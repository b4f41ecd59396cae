package smcwire

import "encoding/binary"

// CDC (connection data control) message: 44 bytes, type 0xFE, sent as an
// RC SEND after the RDMA WRITEs it announces.
//
//	 0 type 0xFE (1)          1 length 44 (1)      2 sequence number (2)
//	 4 alert token (4): the receiving connection's token from CLC
//	 8 producer cursor: reserved (2), wrap (2), count (4)
//	16 consumer cursor: reserved (2), wrap (2), count (4)
//	24 producer flags (1)     25 connection state flags (1)   26 reserved (18)
const (
	CDCType = 0xFE
	CDCLen  = 44
)

// CDC producer flags (byte 24), MSB first as RFC 7609 draws them.
const (
	CDCWriteBlocked      CDCProdFlags = 0x80 // sender has data but no room in the peer RMBE
	CDCUrgentPending     CDCProdFlags = 0x40 // urgent data pending
	CDCUrgentPresent     CDCProdFlags = 0x20 // urgent data present
	CDCConsUpdateRequest CDCProdFlags = 0x10 // consumer cursor update requested
	CDCFailoverValidate  CDCProdFlags = 0x08 // failover validation
)

// CDC connection state flags (byte 25), MSB first.
const (
	CDCPeerDoneWriting CDCConnFlags = 0x80 // shutdown(SHUT_WR)
	CDCPeerConnClosed  CDCConnFlags = 0x40 // close()
	CDCPeerConnAbort   CDCConnFlags = 0x20 // abnormal close
)

// CDCProdFlags is the 'producer flags' byte.
type CDCProdFlags uint8

// CDCConnFlags is the 'connection state flags' byte.
type CDCConnFlags uint8

// CDC is a view of a CDC message as checked by ParseCDC.
type CDC []byte

// ParseCDC checks b as a CDC message: type 0xFE, length byte 44 and 44
// bytes present. It returns b cut to 44 bytes.
func ParseCDC(b []byte) (CDC, error) {
	if len(b) < 2 {
		return nil, ErrShort
	}
	if b[0] != CDCType {
		return nil, ErrType
	}
	if b[1] != CDCLen {
		return nil, ErrLength
	}
	if len(b) < CDCLen {
		return nil, ErrShort
	}
	return CDC(b[:CDCLen]), nil
}

// Seq returns the 'sequence number' (per connection, +1 per CDC).
func (c CDC) Seq() uint16 { return binary.BigEndian.Uint16(c[2:]) }

// Token returns the 'alert token' of the receiving connection.
func (c CDC) Token() uint32 { return binary.BigEndian.Uint32(c[4:]) }

// Prod returns the 'producer cursor': how far the sender has written into
// the receiver's RMBE.
func (c CDC) Prod() Cursor { return cursorAt(c[8:]) }

// Cons returns the 'consumer cursor': how far the sender has consumed its
// own RMBE (the receiver's data).
func (c CDC) Cons() Cursor { return cursorAt(c[16:]) }

// ProdFlags returns the 'producer flags' byte.
func (c CDC) ProdFlags() CDCProdFlags { return CDCProdFlags(c[24]) }

// ConnFlags returns the 'connection state flags' byte.
func (c CDC) ConnFlags() CDCConnFlags { return CDCConnFlags(c[25]) }

// PeerDoneWriting reports 'peer done writing' (the sender shut down writing).
func (c CDC) PeerDoneWriting() bool { return c.ConnFlags()&CDCPeerDoneWriting != 0 }

// PeerConnClosed reports 'peer connection closed'.
func (c CDC) PeerConnClosed() bool { return c.ConnFlags()&CDCPeerConnClosed != 0 }

// PeerConnAbort reports 'peer abnormal close'.
func (c CDC) PeerConnAbort() bool { return c.ConnFlags()&CDCPeerConnAbort != 0 }

// CDCFields holds every field of a CDC message.
type CDCFields struct {
	Seq       uint16       `json:"seq"`
	Token     uint32       `json:"token"`
	Prod      Cursor       `json:"prod"`
	Cons      Cursor       `json:"cons"`
	ProdFlags CDCProdFlags `json:"prod_flags"`
	ConnFlags CDCConnFlags `json:"conn_flags"`
}

// Fields copies the message's fields.
func (c CDC) Fields() CDCFields {
	return CDCFields{c.Seq(), c.Token(), c.Prod(), c.Cons(), c.ProdFlags(), c.ConnFlags()}
}

// AppendCDC appends a 44-byte CDC message.
func AppendCDC(b []byte, f *CDCFields) []byte {
	b, m := grow(b, CDCLen)
	m[0], m[1] = CDCType, CDCLen
	binary.BigEndian.PutUint16(m[2:], f.Seq)
	binary.BigEndian.PutUint32(m[4:], f.Token)
	f.Prod.put(m[8:])
	f.Cons.put(m[16:])
	m[24], m[25] = byte(f.ProdFlags), byte(f.ConnFlags)
	return b
}

// Cursor is a position in an RMBE: Count bytes into the buffer after Wrap
// complete passes (Wrap is 16 bits and wraps around).
type Cursor struct {
	Wrap  uint16 `json:"wrap"`
	Count uint32 `json:"count"`
}

func cursorAt(b []byte) Cursor {
	return Cursor{binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint32(b[4:])}
}

func (c Cursor) put(b []byte) {
	binary.BigEndian.PutUint16(b[2:], c.Wrap)
	binary.BigEndian.PutUint32(b[4:], c.Count)
}

// Add returns c advanced by n bytes (n <= size) in an RMBE of size bytes.
func (c Cursor) Add(n, size uint32) Cursor {
	c.Count += n
	if c.Count >= size {
		c.Count -= size
		c.Wrap++
	}
	return c
}

// Diff returns how many bytes c is ahead of old in an RMBE of size bytes,
// 0 if it is not ahead. Like Linux's smc_curs_diff, a different wrap
// counts as one pass: size - old.Count + c.Count. Wraps compare modulo
// 2^16, so wrap 0 is ahead of 0xFFFF.
func (c Cursor) Diff(old Cursor, size uint32) uint32 {
	switch d := int16(c.Wrap - old.Wrap); {
	case d < 0, d == 0 && c.Count <= old.Count:
		return 0
	case d == 0:
		return c.Count - old.Count
	}
	return size - old.Count + c.Count
}

// Before reports whether c lies strictly before o (wraps modulo 2^16):
// a receiver ignores a cursor that would move backwards.
func (c Cursor) Before(o Cursor) bool {
	d := int16(c.Wrap - o.Wrap)
	return d < 0 || d == 0 && c.Count < o.Count
}
