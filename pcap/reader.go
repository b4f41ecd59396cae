package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Record is one captured frame.
type Record struct {
	// Data is the captured bytes. Each Record gets its own slice.
	Data []byte
	// Time is the capture timestamp.
	Time time.Time
	// Length is the frame's length on the wire; larger than len(Data) if
	// the capture truncated it.
	Length int
	// LinkType is the link layer of Data (pcapng: of its interface).
	LinkType layers.LinkType
	// Interface is the pcapng interface index (0 for classic pcap).
	Interface int
	// Direction is the pcapng epb_flags direction, if recorded.
	Direction Direction
	// Comment is the pcapng opt_comment of the packet, if any.
	Comment string
}

// MaxRecordLen is the most captured bytes of one frame a Reader accepts:
// Wireshark's limit for ordinary link types. Every length a file states
// is checked against it (and against the file's snapshot length) before
// anything is allocated, so that a hostile file claiming a 4 GiB record
// costs an error, not 4 GiB.
const MaxRecordLen = 256 << 10

// Reader reads frames from a classic pcap or a pcapng capture, detected by
// the file's magic number. Classic pcap is read with pcapgo.Reader; pcapng
// with a small reader of our own, because pcapgo.NgReader skips the
// Enhanced Packet Block options that carry direction and comments.
type Reader struct {
	format  Format
	classic *pcapgo.Reader
	ng      *ngReader
	// Classic pcap: the buffered file, to check a record's length before
	// pcapgo allocates it, its byte order, and the largest record allowed
	// and why.
	br     *bufio.Reader
	order  binary.ByteOrder
	maxLen uint32
	maxWhy string
}

// NewReader reads the capture's file header from r.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(4)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if binary.LittleEndian.Uint32(magic) == ngBlockSHB {
		ng, err := newNgReader(br)
		if err != nil {
			return nil, err
		}
		return &Reader{format: FormatPCAPNG, ng: ng}, nil
	}
	order := classicOrder(magic) // before pcapgo reads on: magic is br's buffer
	c, err := pcapgo.NewReader(br)
	if err != nil {
		return nil, err
	}
	rd := &Reader{format: FormatPCAP, classic: c, br: br, order: order,
		maxLen: c.Snaplen(), maxWhy: fmt.Sprintf("the file's snapshot length (%d)", c.Snaplen())}
	if rd.maxLen == 0 || rd.maxLen > MaxRecordLen {
		rd.maxLen, rd.maxWhy = MaxRecordLen, fmt.Sprintf("the %d bytes this reader accepts", MaxRecordLen)
	}
	c.SetSnaplen(rd.maxLen)
	return rd, nil
}

// classicOrder is the byte order of a classic pcap file whose first four
// bytes are magic (which pcapgo has validated): the magic numbers for
// microsecond and nanosecond timestamps, written in the file's order.
func classicOrder(magic []byte) binary.ByteOrder {
	switch binary.LittleEndian.Uint32(magic) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		return binary.LittleEndian
	}
	return binary.BigEndian
}

// Format returns the capture's format.
func (r *Reader) Format() Format { return r.format }

// LinkType returns the link type of the capture (pcapng: of its first
// interface; LinkTypeNull if it declares none).
func (r *Reader) LinkType() layers.LinkType {
	if r.classic != nil {
		return r.classic.LinkType()
	}
	return r.ng.firstLinkType
}

// Next returns the next frame, or io.EOF after the last one.
func (r *Reader) Next() (Record, error) {
	if r.ng != nil {
		return r.ng.next()
	}
	// pcapgo allocates what the record header claims: check the claim
	// first (a header cut short is pcapgo's to report).
	if h, err := r.br.Peek(16); err == nil {
		if n := r.order.Uint32(h[8:]); n > r.maxLen {
			return Record{}, fmt.Errorf("pcap: a record claims %d captured bytes, more than %s: the file is corrupt or not a capture", n, r.maxWhy)
		}
	}
	data, ci, err := r.classic.ReadPacketData()
	if err != nil {
		return Record{}, err
	}
	return Record{Data: data, Time: ci.Timestamp, Length: ci.Length, LinkType: r.classic.LinkType()}, nil
}

// ReadPacketData implements gopacket.PacketDataSource, so that a Reader can
// feed gopacket.NewPacketSource. Direction and comment are dropped.
func (r *Reader) ReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	rec, err := r.Next()
	if err != nil {
		return nil, gopacket.CaptureInfo{}, err
	}
	return rec.Data, gopacket.CaptureInfo{
		Timestamp: rec.Time, CaptureLength: len(rec.Data), Length: rec.Length, InterfaceIndex: rec.Interface,
	}, nil
}

// errNgFormat reports a malformed pcapng file.
var errNgFormat = errors.New("pcap: malformed pcapng block")
