package pcap

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"time"

	"github.com/google/gopacket/layers"
)

// ngIface is what the reader keeps of an Interface Description Block.
type ngIface struct {
	linkType layers.LinkType
	snapLen  uint32
	perSec   uint64 // timestamp units per second (if_tsresol)
	offset   int64  // seconds to add (if_tsoffset)
}

// ngReader reads the blocks of a pcapng file: section headers (either byte
// order), interface descriptions, and enhanced, simple and obsolete packet
// blocks. Other blocks are skipped.
type ngReader struct {
	r             *bufio.Reader
	order         binary.ByteOrder
	ifaces        []ngIface // of the current section
	firstLinkType layers.LinkType
	haveFirst     bool
	buf           []byte // the current block, reused
}

// newNgReader reads the first section header and the blocks up to the
// first interface description, so that LinkType is known.
func newNgReader(r *bufio.Reader) (*ngReader, error) {
	ng := &ngReader{r: r, firstLinkType: layers.LinkTypeNull}
	typ, body, err := ng.readBlock()
	if err != nil {
		return nil, err
	}
	if typ != ngBlockSHB {
		return nil, errNgFormat
	}
	if err := ng.section(body); err != nil {
		return nil, err
	}
	for len(ng.ifaces) == 0 {
		// Peek the next block type: stop before any packet block, which
		// next() must return.
		h, err := ng.r.Peek(4)
		if err != nil || ng.order.Uint32(h) != ngBlockIDB {
			break
		}
		_, body, err := ng.readBlock()
		if err != nil {
			return nil, err
		}
		if err := ng.iface(body); err != nil {
			return nil, err
		}
	}
	return ng, nil
}

// readBlock reads one whole block and returns its type and body (between
// the length fields). A section header switches the byte order first.
func (ng *ngReader) readBlock() (uint32, []byte, error) {
	var h [12]byte
	if _, err := io.ReadFull(ng.r, h[:8]); err != nil {
		return 0, nil, err // io.EOF only between blocks
	}
	typ := binary.LittleEndian.Uint32(h[:4])
	if typ == ngBlockSHB {
		if _, err := io.ReadFull(ng.r, h[8:12]); err != nil {
			return 0, nil, unexpected(err)
		}
		switch uint32(ngByteOrderMagic) {
		case binary.LittleEndian.Uint32(h[8:]):
			ng.order = binary.LittleEndian
		case binary.BigEndian.Uint32(h[8:]):
			ng.order = binary.BigEndian
		default:
			return 0, nil, errNgFormat
		}
	} else if ng.order == nil {
		return 0, nil, errNgFormat
	}
	typ = ng.order.Uint32(h[:4])
	n32 := ng.order.Uint32(h[4:8])
	if n32 < 12 || n32%4 != 0 || (typ == ngBlockSHB && n32 < 28) {
		return 0, nil, errNgFormat
	}
	if !ngDecoded(typ) {
		return typ, nil, ng.skip(n32, len(h[:8]))
	}
	if n32 > ngMaxBlock {
		return 0, nil, fmt.Errorf("pcap: a pcapng block of type %d claims %d bytes, more than the %d this reader accepts (a frame of at most %d bytes and its options): the file is corrupt or not a capture",
			typ, n32, ngMaxBlock, MaxRecordLen)
	}
	n := int(n32)
	if cap(ng.buf) < n {
		ng.buf = make([]byte, n)
	}
	b := ng.buf[:n]
	copy(b, h[:8])
	got := 8
	if typ == ngBlockSHB {
		copy(b[8:], h[8:12])
		got = 12
	}
	if _, err := io.ReadFull(ng.r, b[got:]); err != nil {
		return 0, nil, unexpected(err)
	}
	if ng.order.Uint32(b[n-4:]) != uint32(n) {
		return 0, nil, errNgFormat
	}
	return typ, b[8 : n-4], nil
}

// ngDecoded says whether the reader decodes blocks of type typ; it skips
// the others.
func ngDecoded(typ uint32) bool {
	switch typ {
	case ngBlockSHB, ngBlockIDB, ngBlockEPB, ngBlockPB, ngBlockSPB:
		return true
	}
	return false
}

// skip passes over the rest of a block of n bytes whose first got bytes
// are read, without keeping it: a block the reader does not decode may be
// of any length (a decryption secrets block can hold megabytes), and
// costs no memory.
func (ng *ngReader) skip(n uint32, got int) error {
	if _, err := ng.r.Discard(int(n) - got - 4); err != nil {
		return unexpected(err)
	}
	var t [4]byte
	if _, err := io.ReadFull(ng.r, t[:]); err != nil {
		return unexpected(err)
	}
	if ng.order.Uint32(t[:]) != n {
		return errNgFormat
	}
	return nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// next returns the next packet of the file.
func (ng *ngReader) next() (Record, error) {
	for {
		typ, body, err := ng.readBlock()
		if err != nil {
			return Record{}, err
		}
		switch typ {
		case ngBlockSHB:
			if err := ng.section(body); err != nil {
				return Record{}, err
			}
		case ngBlockIDB:
			if err := ng.iface(body); err != nil {
				return Record{}, err
			}
		case ngBlockEPB:
			return ng.packet(body, false)
		case ngBlockPB:
			return ng.packet(body, true)
		case ngBlockSPB:
			return ng.simplePacket(body)
		}
	}
}

// section starts a new section: interfaces are numbered afresh.
func (ng *ngReader) section(body []byte) error {
	// magic, major, minor, section length
	if len(body) < 16 || ng.order.Uint16(body[4:]) != 1 {
		return fmt.Errorf("pcap: unsupported pcapng section version")
	}
	ng.ifaces = ng.ifaces[:0]
	return nil
}

// iface records an Interface Description Block.
func (ng *ngReader) iface(body []byte) error {
	if len(body) < 8 {
		return errNgFormat
	}
	in := ngIface{
		linkType: layers.LinkType(ng.order.Uint16(body[0:])),
		snapLen:  ng.order.Uint32(body[4:]),
		perSec:   1_000_000, // default if_tsresol: microseconds
	}
	err := ng.options(body[8:], func(code uint16, v []byte) error {
		switch {
		case code == ngOptIfTSResol && len(v) >= 1:
			r := v[0]
			switch {
			case r&0x80 != 0 && r&0x7F < 64:
				in.perSec = 1 << (r & 0x7F)
			case r&0x80 == 0 && r <= 19:
				in.perSec = 1
				for range r {
					in.perSec *= 10
				}
			default:
				return errNgFormat
			}
		case code == ngOptIfTSOffset && len(v) == 8:
			in.offset = int64(ng.order.Uint64(v))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(ng.ifaces) == ngMaxIfaces {
		return fmt.Errorf("pcap: more than %d pcapng interfaces in one section: the file is corrupt or hostile", ngMaxIfaces)
	}
	if !ng.haveFirst {
		ng.firstLinkType, ng.haveFirst = in.linkType, true
	}
	ng.ifaces = append(ng.ifaces, in)
	return nil
}

// packet decodes an Enhanced Packet Block, or an obsolete Packet Block
// (16-bit interface ID and drop count in place of the 32-bit interface ID).
func (ng *ngReader) packet(body []byte, obsolete bool) (Record, error) {
	if len(body) < 20 {
		return Record{}, errNgFormat
	}
	ifIndex := int(ng.order.Uint32(body[0:]))
	if obsolete {
		ifIndex = int(ng.order.Uint16(body[0:]))
	}
	if ifIndex >= len(ng.ifaces) {
		return Record{}, fmt.Errorf("pcap: pcapng packet on undeclared interface %d", ifIndex)
	}
	in := &ng.ifaces[ifIndex]
	ts := uint64(ng.order.Uint32(body[4:]))<<32 | uint64(ng.order.Uint32(body[8:]))
	capLen32 := ng.order.Uint32(body[12:])
	if err := in.checkLen(capLen32); err != nil {
		return Record{}, err
	}
	capLen := int(capLen32)
	rec := Record{
		Time:      in.time(ts),
		Length:    wireLen(ng.order.Uint32(body[16:])),
		LinkType:  in.linkType,
		Interface: ifIndex,
	}
	body = body[20:]
	if pad4(capLen) > len(body) {
		return Record{}, errNgFormat
	}
	rec.Data = append([]byte(nil), body[:capLen]...)
	err := ng.options(body[pad4(capLen):], func(code uint16, v []byte) error {
		switch {
		case code == ngOptEPBFlags && len(v) == 4:
			rec.Direction = Direction(ng.order.Uint32(v) & 3)
		case code == ngOptComment && rec.Comment == "":
			rec.Comment = string(v)
		}
		return nil
	})
	return rec, err
}

// simplePacket decodes a Simple Packet Block: interface 0, no timestamp.
func (ng *ngReader) simplePacket(body []byte) (Record, error) {
	if len(body) < 4 || len(ng.ifaces) == 0 {
		return Record{}, errNgFormat
	}
	in := &ng.ifaces[0]
	// The captured length is implied: the original, cut to the snapshot
	// length and to what the block holds (which ngMaxBlock bounds).
	orig := ng.order.Uint32(body)
	capLen := min(orig, uint32(len(body)-4))
	if in.snapLen != 0 {
		capLen = min(capLen, in.snapLen)
	}
	if capLen > MaxRecordLen {
		return Record{}, in.checkLen(capLen)
	}
	return Record{
		Data:     append([]byte(nil), body[4:4+capLen]...),
		Length:   wireLen(orig),
		LinkType: in.linkType,
	}, nil
}

// checkLen says whether a packet on the interface may have n captured
// bytes: no more than its snapshot length (if it states one) and
// MaxRecordLen.
func (in *ngIface) checkLen(n uint32) error {
	switch {
	case in.snapLen != 0 && n > in.snapLen:
		return fmt.Errorf("pcap: a pcapng packet claims %d captured bytes, more than its interface's snapshot length (%d): the file is corrupt", n, in.snapLen)
	case n > MaxRecordLen:
		return fmt.Errorf("pcap: a pcapng packet claims %d captured bytes, more than the %d this reader accepts", n, MaxRecordLen)
	}
	return nil
}

// wireLen is a frame's original length as an int, saturated where int has
// 32 bits.
func wireLen(n uint32) int { return int(min(uint64(n), math.MaxInt)) }

// options calls fn for each option of a block's option list, up to
// opt_endofopt or the end of the list.
func (ng *ngReader) options(b []byte, fn func(code uint16, v []byte) error) error {
	for len(b) >= 4 {
		code, n := ng.order.Uint16(b), int(ng.order.Uint16(b[2:]))
		if code == ngOptEnd {
			return nil
		}
		b = b[4:]
		if pad4(n) > len(b) {
			return errNgFormat
		}
		if err := fn(code, b[:n]); err != nil {
			return err
		}
		b = b[pad4(n):]
	}
	return nil
}

// time converts a timestamp in the interface's units.
func (in *ngIface) time(ts uint64) time.Time {
	sec, frac := ts/in.perSec, ts%in.perSec
	hi, lo := bits.Mul64(frac, 1_000_000_000)
	nsec, _ := bits.Div64(hi, lo, in.perSec) // hi < perSec since frac < perSec
	return time.Unix(int64(sec)+in.offset, int64(nsec)).UTC()
}
