package afpacket

import "encoding/binary"

// A TPACKET_V3 block (linux/if_packet.h) as the kernel hands it over: a
// tpacket_block_desc, then num_pkts records from offset_to_first_pkt on,
// each a tpacket3_hdr, a sockaddr_ll, the virtio_net_hdr (PACKET_VNET_HDR)
// just before the frame at tp_mac, and the frame's tp_snaplen bytes; each
// record's tp_next_offset leads to the next. The layout is Linux's ABI,
// spelled out here so that the walker builds and is fuzzed on every system.
//
// Every number in a block is read as untrusted: the walker never slices
// outside the block whatever num_pkts, offset_to_first_pkt,
// tp_next_offset, tp_mac and tp_snaplen say.
const (
	blockDescLen   = 48 // tpacket_block_desc with tpacket_hdr_v1
	blockStatusOff = 8  // tpacket_hdr_v1.block_status
	blockNumOff    = 12 // .num_pkts
	blockFirstOff  = 16 // .offset_to_first_pkt

	tp3HdrLen     = 48 // TPACKET_ALIGN(sizeof(struct tpacket3_hdr))
	tp3NextOff    = 0  // tp_next_offset
	tp3SnaplenOff = 12 // tp_snaplen
	tp3LenOff     = 16 // tp_len
	tp3StatusOff  = 20 // tp_status
	tp3MacOff     = 24 // tp_mac
	sllLen        = 20 // sizeof(struct sockaddr_ll), behind the header
	sllPktTypeOff = 10 // sll_pkttype

	// minMac is the least tp_mac a record can have: its header, the
	// sockaddr_ll and the virtio_net_hdr come first.
	minMac = tp3HdrLen + sllLen + vnetHdrLen
)

// ringFrame is one record of a block: the frame and what the kernel said
// of it, the bytes still in the block.
type ringFrame struct {
	data    []byte // tp_snaplen bytes from tp_mac
	vnet    []byte // the virtio_net_hdr before them
	pktType uint8  // sll_pkttype
	status  uint32 // tp_status (the bits PACKET_AUXDATA carries)
	cut     bool   // tp_snaplen < tp_len: the kernel clamped a frame longer than a block
}

// walkResult is what blockWalk.next found.
type walkResult uint8

const (
	walkFrame walkResult = iota // a record, in bounds
	walkEnd                     // num_pkts records read
	walkBad                     // a number that leads outside the block: the rest is skipped
)

// blockWalk reads the records of one block in order.
type blockWalk struct {
	blk     []byte
	left    int // records not read yet
	off     int // offset of the record read last (the first one before that)
	step    int // its tp_next_offset, checked when it is followed
	minNext int // the least tp_next_offset that record allows (0: none read yet)
}

// start begins the walk of blk; false means its descriptor lies.
func (w *blockWalk) start(blk []byte) bool {
	*w = blockWalk{}
	if len(blk) < blockDescLen {
		return false
	}
	n := binary.NativeEndian.Uint32(blk[blockNumOff:])
	first := binary.NativeEndian.Uint32(blk[blockFirstOff:])
	if n == 0 {
		return true // a block the retire timer closed empty
	}
	// Each record takes minMac bytes at least: a count beyond what the
	// block could hold lies, and is refused before any record is read.
	if first < blockDescLen || uint64(first) >= uint64(len(blk)) || uint64(n) > uint64(len(blk))/minMac {
		return false
	}
	w.blk, w.left, w.off = blk, int(n), int(first)
	return true
}

// next returns the next record of the block.
func (w *blockWalk) next() (ringFrame, walkResult) {
	if w.left == 0 {
		return ringFrame{}, walkEnd
	}
	if w.minNext > 0 {
		// Follow the previous record's tp_next_offset: it must step past
		// that record's frame and stay in the block.
		if w.step < w.minNext || w.step > len(w.blk)-w.off {
			return w.bad()
		}
		w.off += w.step
	}
	if len(w.blk)-w.off < minMac {
		return w.bad()
	}
	h := w.blk[w.off:]
	snap := uint64(binary.NativeEndian.Uint32(h[tp3SnaplenOff:]))
	length := binary.NativeEndian.Uint32(h[tp3LenOff:])
	mac := uint64(binary.NativeEndian.Uint16(h[tp3MacOff:]))
	if mac < minMac || mac+snap > uint64(len(h)) {
		return w.bad()
	}
	end := int(mac + snap)
	w.left--
	w.step, w.minNext = int(binary.NativeEndian.Uint32(h[tp3NextOff:])), max(end, 1)
	return ringFrame{
		data:    h[mac:end:end],
		vnet:    h[mac-vnetHdrLen : mac : mac],
		pktType: h[tp3HdrLen+sllPktTypeOff],
		status:  binary.NativeEndian.Uint32(h[tp3StatusOff:]),
		cut:     uint64(length) != snap,
	}, walkFrame
}

func (w *blockWalk) bad() (ringFrame, walkResult) {
	w.left = 0
	return ringFrame{}, walkBad
}
