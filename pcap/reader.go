package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
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

// Reader reads frames from a classic pcap or a pcapng capture, detected by
// the file's magic number. Classic pcap is read with pcapgo.Reader; pcapng
// with a small reader of our own, because pcapgo.NgReader skips the
// Enhanced Packet Block options that carry direction and comments.
type Reader struct {
	format  Format
	classic *pcapgo.Reader
	ng      *ngReader
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
	c, err := pcapgo.NewReader(br)
	if err != nil {
		return nil, err
	}
	return &Reader{format: FormatPCAP, classic: c}, nil
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
