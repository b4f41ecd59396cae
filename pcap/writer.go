package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/goroce/goroce/rocev2"
)

// DefaultInterfaceName is the pcapng interface name when WriterOptions
// gives none.
const DefaultInterfaceName = "goroce0"

// classicSnapLen is the snapshot length a classic pcap header states when
// the writer does not truncate (tcpdump's default).
const classicSnapLen = 262144

// Errors of the capture writer.
var (
	// ErrWriterClosed is returned by writes after Close.
	ErrWriterClosed = errors.New("pcap: writer is closed")
	// ErrPacketSize is returned by WriteRoCE for a packet that does not fit
	// one UDP datagram, or that is too short to reseal.
	ErrPacketSize = errors.New("pcap: RoCE packet too short or too long for one UDP datagram")
)

// WriterOptions configures a capture Writer. The zero value writes pcapng
// with an interface named DefaultInterfaceName and no truncation.
type WriterOptions struct {
	// Format selects pcapng (default) or classic pcap.
	Format Format
	// InterfaceName is the pcapng if_name of the capture's one interface.
	InterfaceName string
	// Description is the pcapng if_description, e.g. "goroce over udp4 10.0.0.1:4791".
	Description string
	// SnapLen truncates every frame to this many bytes; 0 keeps frames whole.
	SnapLen int
	// ResealICRC makes WriteRoCE store the ICRC computed for the headers it
	// synthesises instead of the packet's own. Use it for received packets
	// whose IP header was not seen (a UDP socket hides the IPv4 ID, which
	// the ICRC covers), so that the capture's ICRCs verify. The caller's
	// buffer is never modified.
	ResealICRC bool
}

// Writer writes Ethernet frames to a pcapng or pcap capture. It is safe for
// concurrent use, buffers its output (call Flush or Close), and does not
// allocate per packet.
type Writer struct {
	mu      sync.Mutex
	bw      *bufio.Writer
	opts    WriterOptions
	classic *pcapgo.Writer
	closed  bool

	hdr   [rocev2.MaxEncapLen]byte // Ethernet/IP/UDP headers WriteRoCE synthesises
	crc   [rocev2.ICRCLen]byte     // a resealed ICRC
	frame []byte                   // classic pcap needs each frame contiguous
	scr   [32]byte                 // block header and option scratch
}

// NewWriter writes the file header (pcapng section and interface blocks, or
// the classic pcap header) to w and returns a Writer for the frames. The
// link type is Ethernet.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	if opts.InterfaceName == "" {
		opts.InterfaceName = DefaultInterfaceName
	}
	if opts.SnapLen < 0 {
		opts.SnapLen = 0
	}
	cw := &Writer{bw: bufio.NewWriterSize(w, 64<<10), opts: opts}
	var err error
	switch opts.Format {
	case FormatPCAPNG:
		err = cw.writeNgHeader()
	case FormatPCAP:
		cw.classic = pcapgo.NewWriterNanos(cw.bw)
		snap := uint32(classicSnapLen)
		if opts.SnapLen > 0 {
			snap = uint32(opts.SnapLen)
		}
		err = cw.classic.WriteFileHeader(snap, layers.LinkTypeEthernet)
	default:
		return nil, errors.New("pcap: unknown capture format")
	}
	if err != nil {
		return nil, err
	}
	return cw, nil
}

// WriteFrame records an Ethernet frame as it is.
func (w *Writer) WriteFrame(ts time.Time, dir Direction, frame []byte) error {
	return w.WriteFrameComment(ts, dir, frame, "")
}

// WriteFrameComment records an Ethernet frame with a comment (pcapng
// opt_comment, e.g. "retransmission"); classic pcap drops the comment.
func (w *Writer) WriteFrameComment(ts time.Time, dir Direction, frame []byte, comment string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.write(ts, dir, comment, frame, nil, nil)
}

// WriteRoCE records a RoCEv2 packet as a UDP socket backend sends or
// receives it (BTH through ICRC), framed in the Ethernet, IP and UDP headers
// of flow: IPv4 header checksum computed, UDP checksum 0. The packet bytes
// are written as they are unless WriterOptions.ResealICRC is set.
func (w *Writer) WriteRoCE(ts time.Time, dir Direction, flow *rocev2.Flow, pkt []byte) error {
	return w.WriteRoCEComment(ts, dir, flow, pkt, "")
}

// WriteRoCEComment is WriteRoCE with a per-packet comment (pcapng only).
func (w *Writer) WriteRoCEComment(ts time.Time, dir Direction, flow *rocev2.Flow, pkt []byte, comment string) error {
	ipLen := flow.IPHeaderLen()
	if len(pkt) > 0xFFFF-ipLen-rocev2.UDPHeaderLen || (w.opts.ResealICRC && len(pkt) < rocev2.BTHLen+rocev2.ICRCLen) {
		return ErrPacketSize
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := flow.EncodeEthernet(w.hdr[:])
	n += flow.EncodeIPUDP(w.hdr[n:], len(pkt))
	if !w.opts.ResealICRC {
		return w.write(ts, dir, comment, w.hdr[:n], pkt, nil)
	}
	body := pkt[:len(pkt)-rocev2.ICRCLen]
	binary.LittleEndian.PutUint32(w.crc[:], flow.ICRC(body))
	return w.write(ts, dir, comment, w.hdr[:n], body, w.crc[:])
}

// write records the frame made of parts a, b and c (any may be empty). It
// takes three slices rather than a variadic list so that it does not
// allocate. w.mu is held.
func (w *Writer) write(ts time.Time, dir Direction, comment string, a, b, c []byte) error {
	if w.closed {
		return ErrWriterClosed
	}
	if ts.IsZero() {
		ts = time.Now()
	}
	orig := len(a) + len(b) + len(c)
	capLen := orig
	if w.opts.SnapLen > 0 && capLen > w.opts.SnapLen {
		capLen = w.opts.SnapLen
	}
	if w.classic != nil {
		w.frame = append(append(append(w.frame[:0], a...), b...), c...)
		ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: capLen, Length: orig}
		return w.classic.WritePacket(ci, w.frame[:capLen])
	}
	return w.writeEPB(ts, dir, comment, capLen, orig, a, b, c)
}

// writeEPB writes an Enhanced Packet Block:
//
//	type | length | interface | ts high | ts low | caplen | origlen |
//	data, padded to 4 | options | length
func (w *Writer) writeEPB(ts time.Time, dir Direction, comment string, capLen, orig int, a, b, c []byte) error {
	if len(comment) > 0xFFFF {
		comment = comment[:0xFFFF]
	}
	opts := 0
	if dir != DirectionUnknown {
		opts += 4 + 4
	}
	if comment != "" {
		opts += 4 + pad4(len(comment))
	}
	if opts > 0 {
		opts += 4 // opt_endofopt
	}
	total := 28 + pad4(capLen) + opts + 4
	ns := uint64(ts.UnixNano())
	s := w.scr[:28]
	le := binary.LittleEndian
	le.PutUint32(s[0:], ngBlockEPB)
	le.PutUint32(s[4:], uint32(total))
	le.PutUint32(s[8:], 0) // the one interface
	le.PutUint32(s[12:], uint32(ns>>32))
	le.PutUint32(s[16:], uint32(ns))
	le.PutUint32(s[20:], uint32(capLen))
	le.PutUint32(s[24:], uint32(orig))
	w.bw.Write(s)
	left := capLen
	for _, p := range [...][]byte{a, b, c} {
		p = p[:min(len(p), left)]
		w.bw.Write(p)
		left -= len(p)
	}
	w.writeZeros(pad4(capLen) - capLen)
	if dir != DirectionUnknown {
		w.writeOptHeader(ngOptEPBFlags, 4)
		le.PutUint32(w.scr[:4], uint32(dir))
		w.bw.Write(w.scr[:4])
	}
	if comment != "" {
		w.writeOptHeader(ngOptComment, len(comment))
		w.bw.WriteString(comment)
		w.writeZeros(pad4(len(comment)) - len(comment))
	}
	if opts > 0 {
		w.writeOptHeader(ngOptEnd, 0)
	}
	le.PutUint32(w.scr[:4], uint32(total))
	_, err := w.bw.Write(w.scr[:4]) // bufio.Writer errors are sticky: this reports any above
	return err
}

func (w *Writer) writeOptHeader(code, n int) {
	binary.LittleEndian.PutUint16(w.scr[0:], uint16(code))
	binary.LittleEndian.PutUint16(w.scr[2:], uint16(n))
	w.bw.Write(w.scr[:4])
}

func (w *Writer) writeZeros(n int) {
	clear(w.scr[:n])
	w.bw.Write(w.scr[:n])
}

// writeNgHeader writes the Section Header Block and the one Interface
// Description Block (Ethernet, nanosecond timestamps).
func (w *Writer) writeNgHeader() error {
	le := binary.LittleEndian
	var b []byte
	block := func(typ uint32, body func()) {
		start := len(b)
		b = le.AppendUint32(b, typ)
		b = le.AppendUint32(b, 0) // length, patched below
		body()
		b = le.AppendUint32(b, 0)
		n := uint32(len(b) - start)
		le.PutUint32(b[start+4:], n)
		le.PutUint32(b[len(b)-4:], n)
	}
	opt := func(code uint16, v []byte) {
		b = le.AppendUint16(b, code)
		b = le.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
		b = append(b, make([]byte, pad4(len(v))-len(v))...)
	}
	block(ngBlockSHB, func() {
		b = le.AppendUint32(b, ngByteOrderMagic)
		b = le.AppendUint16(b, 1) // version 1.0
		b = le.AppendUint16(b, 0)
		b = le.AppendUint64(b, ^uint64(0)) // section length not given
		opt(ngOptSHBUserAppl, []byte("goroce"))
		opt(ngOptEnd, nil)
	})
	block(ngBlockIDB, func() {
		b = le.AppendUint16(b, uint16(layers.LinkTypeEthernet))
		b = le.AppendUint16(b, 0)
		b = le.AppendUint32(b, uint32(w.opts.SnapLen)) // 0: no limit
		opt(ngOptIfName, []byte(truncate(w.opts.InterfaceName)))
		if w.opts.Description != "" {
			opt(ngOptIfDesc, []byte(truncate(w.opts.Description)))
		}
		opt(ngOptIfTSResol, []byte{ngTSResolNanos})
		opt(ngOptEnd, nil)
	})
	_, err := w.bw.Write(b)
	return err
}

// truncate keeps s within a pcapng option's 16-bit length.
func truncate(s string) string { return s[:min(len(s), 0xFFF0)] }

// Flush writes buffered records to the underlying writer.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bw.Flush()
}

// Close flushes the writer and refuses further records. It does not close
// the underlying io.Writer, which belongs to the caller.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.bw.Flush()
}
