package afpacket

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ringRec is one record putBlock writes: a frame and what the kernel says
// of it, and, for a hostile kernel, a change to the numbers of the record
// once written.
type ringRec struct {
	frame   []byte
	pktType uint8
	status  uint32
	vnet    [vnetHdrLen]byte
	lie     func(hdr []byte) // hdr: the record from its tpacket3_hdr on
}

// ringMac is where the kernel puts a frame in a record of a socket with
// PACKET_VNET_HDR: TPACKET_ALIGN(TPACKET3_HDRLEN + 16) + the virtio_net_hdr,
// less the Ethernet header.
const ringMac = 96 + vnetHdrLen - ethHeaderLen

// putBlock writes recs into blk as the kernel fills a TPACKET_V3 block
// (status aside) and returns blk. Records are 16-byte aligned and each
// tp_next_offset leads to the next, the last one's included.
func putBlock(blk []byte, recs []ringRec) []byte {
	clear(blk)
	binary.NativeEndian.PutUint32(blk[blockNumOff:], uint32(len(recs)))
	binary.NativeEndian.PutUint32(blk[blockFirstOff:], blockDescLen)
	off := blockDescLen
	for _, r := range recs {
		h := blk[off:]
		end := ringMac + len(r.frame)
		next := (end + 15) &^ 15
		binary.NativeEndian.PutUint32(h[tp3NextOff:], uint32(next))
		binary.NativeEndian.PutUint32(h[tp3SnaplenOff:], uint32(len(r.frame)))
		binary.NativeEndian.PutUint32(h[tp3LenOff:], uint32(len(r.frame)))
		binary.NativeEndian.PutUint32(h[tp3StatusOff:], r.status|1) // TP_STATUS_USER
		binary.NativeEndian.PutUint16(h[tp3MacOff:], ringMac)
		h[tp3HdrLen+sllPktTypeOff] = r.pktType
		copy(h[ringMac-vnetHdrLen:], r.vnet[:])
		copy(h[ringMac:], r.frame)
		if r.lie != nil {
			r.lie(h)
		}
		off += next
	}
	return blk
}

func put32(off int, v uint32) func([]byte) {
	return func(h []byte) { binary.NativeEndian.PutUint32(h[off:], v) }
}

// walkAll walks blk and returns what each step found: the frames' bytes,
// with nil for a cut frame, and the last result.
func walkAll(t *testing.T, blk []byte) ([][]byte, walkResult, bool) {
	var w blockWalk
	if !w.start(blk) {
		return nil, walkBad, false
	}
	var got [][]byte
	for range len(blk) { // more steps than any block can take: a hang fails
		f, res := w.next()
		if res != walkFrame {
			return got, res, true
		}
		requireInside(t, blk, f.data)
		requireInside(t, blk, f.vnet)
		if f.cut {
			got = append(got, nil)
		} else {
			got = append(got, f.data)
		}
	}
	t.Fatalf("the walk of a %d-byte block did not end", len(blk))
	return nil, 0, false
}

// requireInside fails unless s lies in blk, capacity included.
func requireInside(t testing.TB, blk, s []byte) {
	if cap(s) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(blk)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	if p < lo || p+uintptr(cap(s)) > lo+uintptr(len(blk)) {
		t.Fatalf("a slice of %d bytes (cap %d) at offset %d reaches outside the %d-byte block", len(s), cap(s), int(p-lo), len(blk))
	}
}

// TestBlockWalkHostile: a kernel that lies (or a bug that scribbles on
// the ring) ends the walk of the block, never in a slice outside it.
func TestBlockWalkHostile(t *testing.T) {
	a, b, c := []byte("first frame"), []byte("second"), []byte("third and last")
	three := []ringRec{{frame: a}, {frame: b}, {frame: c}}
	lieOn := func(i int, lie func([]byte)) []ringRec {
		recs := append([]ringRec(nil), three...)
		recs[i].lie = lie
		return recs
	}
	for _, tc := range []struct {
		name    string
		block   func(blk []byte) []byte
		started bool
		frames  [][]byte
		end     walkResult
	}{
		{"three frames", func(blk []byte) []byte { return putBlock(blk, three) }, true, [][]byte{a, b, c}, walkEnd},
		{"retired empty", func(blk []byte) []byte { return putBlock(blk, nil) }, true, nil, walkEnd},
		{"shorter than its descriptor", func(blk []byte) []byte { return putBlock(blk, three)[:blockDescLen-1] }, false, nil, walkBad},
		{"num_pkts beyond what fits", func(blk []byte) []byte {
			putBlock(blk, three)
			binary.NativeEndian.PutUint32(blk[blockNumOff:], 0xFFFFFFFF)
			return blk
		}, false, nil, walkBad},
		{"first packet inside the descriptor", func(blk []byte) []byte {
			putBlock(blk, three)
			binary.NativeEndian.PutUint32(blk[blockFirstOff:], blockDescLen-8)
			return blk
		}, false, nil, walkBad},
		{"first packet past the end", func(blk []byte) []byte {
			putBlock(blk, three)
			binary.NativeEndian.PutUint32(blk[blockFirstOff:], uint32(len(blk)))
			return blk
		}, false, nil, walkBad},
		{"first packet in the last bytes", func(blk []byte) []byte {
			putBlock(blk, three)
			binary.NativeEndian.PutUint32(blk[blockFirstOff:], uint32(len(blk)-8))
			return blk
		}, true, nil, walkBad},
		{"more packets than records", func(blk []byte) []byte {
			putBlock(blk, three)
			binary.NativeEndian.PutUint32(blk[blockNumOff:], 40)
			return blk
		}, true, [][]byte{a, b, c}, walkBad}, // the zeros after the last record: tp_mac 0
		{"tp_mac inside the header", func(blk []byte) []byte {
			return putBlock(blk, lieOn(1, func(h []byte) { binary.NativeEndian.PutUint16(h[tp3MacOff:], minMac-1) }))
		}, true, [][]byte{a}, walkBad},
		{"tp_mac past the end", func(blk []byte) []byte {
			return putBlock(blk, lieOn(2, func(h []byte) { binary.NativeEndian.PutUint16(h[tp3MacOff:], 0xFFFF) }))
		}, true, [][]byte{a, b}, walkBad},
		{"tp_snaplen past the end", func(blk []byte) []byte { return putBlock(blk, lieOn(0, put32(tp3SnaplenOff, uint32(len(blk))))) }, true, nil, walkBad},
		{"tp_snaplen 4 GiB", func(blk []byte) []byte { return putBlock(blk, lieOn(0, put32(tp3SnaplenOff, 0xFFFFFFFF))) }, true, nil, walkBad},
		{"tp_next_offset 0: a loop", func(blk []byte) []byte { return putBlock(blk, lieOn(0, put32(tp3NextOff, 0))) }, true, [][]byte{a}, walkBad},
		{"tp_next_offset into its own frame", func(blk []byte) []byte { return putBlock(blk, lieOn(0, put32(tp3NextOff, ringMac))) }, true, [][]byte{a}, walkBad},
		{"tp_next_offset past the end", func(blk []byte) []byte { return putBlock(blk, lieOn(1, put32(tp3NextOff, uint32(len(blk))))) }, true, [][]byte{a, b}, walkBad},
		{"tp_next_offset negative as an int32", func(blk []byte) []byte { return putBlock(blk, lieOn(0, put32(tp3NextOff, 0x80000000))) }, true, [][]byte{a}, walkBad},
		{"last tp_next_offset ignored", func(blk []byte) []byte { return putBlock(blk, lieOn(2, put32(tp3NextOff, 0xFFFFFFFF))) }, true, [][]byte{a, b, c}, walkEnd},
		{"cut by the kernel", func(blk []byte) []byte { return putBlock(blk, lieOn(1, put32(tp3LenOff, 70000))) }, true, [][]byte{a, nil, c}, walkEnd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blk := tc.block(make([]byte, 4096))
			frames, end, started := walkAll(t, blk)
			require.Equal(t, tc.started, started, "start")
			assert.Equal(t, tc.frames, frames)
			assert.Equal(t, tc.end, end)
		})
	}
}

// TestBlockWalkFields: what a record says of its frame reaches the frame.
func TestBlockWalkFields(t *testing.T) {
	vnet := [vnetHdrLen]byte{1, gsoUDPL4, 0, 0, 0xE8, 0x03}
	blk := putBlock(make([]byte, 4096), []ringRec{{frame: []byte("x"), pktType: 3, status: statusVLANValid | statusCsumValid, vnet: vnet}})
	var w blockWalk
	require.True(t, w.start(blk))
	f, res := w.next()
	require.Equal(t, walkFrame, res)
	assert.Equal(t, []byte("x"), f.data)
	assert.Equal(t, vnet[:], f.vnet)
	assert.Equal(t, uint8(3), f.pktType)
	assert.Equal(t, uint32(statusVLANValid|statusCsumValid|1), f.status)
	assert.False(t, f.cut)
}

// FuzzBlockWalk: whatever a block holds, the walk ends within num_pkts
// steps and every slice it hands out lies inside the block.
func FuzzBlockWalk(f *testing.F) {
	f.Add(putBlock(make([]byte, 512), []ringRec{{frame: []byte("one")}, {frame: make([]byte, 100)}}))
	f.Add(putBlock(make([]byte, 256), nil))
	f.Add(putBlock(make([]byte, 512), []ringRec{{frame: []byte("loop"), lie: put32(tp3NextOff, 0)}, {frame: []byte("b")}}))
	f.Add(putBlock(make([]byte, 512), []ringRec{{frame: []byte("cut"), lie: put32(tp3LenOff, 9000)}}))
	f.Fuzz(func(t *testing.T, blk []byte) {
		var w blockWalk
		if !w.start(blk) {
			return
		}
		num := int(binary.NativeEndian.Uint32(blk[blockNumOff:]))
		for steps := 0; ; steps++ {
			fr, res := w.next()
			if res != walkFrame {
				if _, again := w.next(); again == walkFrame {
					t.Fatal("a walk that ended goes on")
				}
				return
			}
			if steps >= num {
				t.Fatalf("more than num_pkts (%d) records", num)
			}
			requireInside(t, blk, fr.data)
			requireInside(t, blk, fr.vnet)
			if len(fr.vnet) != vnetHdrLen {
				t.Fatalf("a virtio_net_hdr of %d bytes", len(fr.vnet))
			}
		}
	})
}
