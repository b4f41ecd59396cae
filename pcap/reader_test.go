package pcap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ngBuilder writes pcapng blocks in a chosen byte order, to feed the
// reader files our writer never makes.
type ngBuilder struct {
	bytes.Buffer
	o byteOrder
}

// byteOrder is what binary.LittleEndian and binary.BigEndian both are.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

func (b *ngBuilder) block(typ uint32, body []byte) {
	n := uint32(12 + pad4(len(body)))
	var h [8]byte
	b.o.PutUint32(h[:], typ)
	b.o.PutUint32(h[4:], n)
	b.Write(h[:])
	b.Write(body)
	b.Write(make([]byte, pad4(len(body))-len(body)))
	b.o.PutUint32(h[:], n)
	b.Write(h[:4])
}

func (b *ngBuilder) opt(dst []byte, code uint16, v []byte) []byte {
	dst = b.o.AppendUint16(dst, code)
	dst = b.o.AppendUint16(dst, uint16(len(v)))
	dst = append(dst, v...)
	return append(dst, make([]byte, pad4(len(v))-len(v))...)
}

func (b *ngBuilder) shb() {
	body := b.o.AppendUint32(nil, ngByteOrderMagic)
	body = b.o.AppendUint16(body, 1)
	body = b.o.AppendUint16(body, 0)
	body = b.o.AppendUint64(body, ^uint64(0))
	b.block(ngBlockSHB, body)
}

func (b *ngBuilder) idb(lt layers.LinkType, snap uint32, opts []byte) {
	body := b.o.AppendUint16(nil, uint16(lt))
	body = b.o.AppendUint16(body, 0)
	body = b.o.AppendUint32(body, snap)
	b.block(ngBlockIDB, append(body, opts...))
}

func (b *ngBuilder) epb(ifIndex uint32, ts uint64, data []byte, orig int, opts []byte) {
	body := b.o.AppendUint32(nil, ifIndex)
	body = b.o.AppendUint32(body, uint32(ts>>32))
	body = b.o.AppendUint32(body, uint32(ts))
	body = b.o.AppendUint32(body, uint32(len(data)))
	body = b.o.AppendUint32(body, uint32(orig))
	body = append(body, data...)
	body = append(body, make([]byte, pad4(len(data))-len(data))...)
	b.block(ngBlockEPB, append(body, opts...))
}

// The pcapng reader handles both byte orders, microsecond (default) and
// binary timestamp resolutions, if_tsoffset, several interfaces and
// sections, simple packet blocks and unknown blocks.
func TestReaderPcapngVariants(t *testing.T) {
	frame := vectorFrames(t)["rc_pingpong_s1024.pcap"][5]
	for _, o := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		t.Run(fmt.Sprint(o), func(t *testing.T) {
			b := &ngBuilder{o: o}
			b.shb()
			b.idb(layers.LinkTypeEthernet, 0, nil) // microseconds
			var off [8]byte
			o.PutUint64(off[:], 100)
			b.idb(layers.LinkTypeRaw, 0, b.opt(b.opt(b.opt(nil, ngOptIfTSResol, []byte{0x80 | 10}), ngOptIfTSOffset, off[:]), ngOptEnd, nil))
			b.block(0x0BAD, []byte("unknown block"))
			b.epb(0, 1_500_000, frame, len(frame), b.opt(b.opt(nil, ngOptEPBFlags, o.AppendUint32(nil, 1)), ngOptEnd, nil))
			b.epb(1, 3*1024+512, frame[14:], len(frame)-14, nil) // 3.5 s in 2^-10 units, +100 s
			b.block(ngBlockSPB, append(o.AppendUint32(nil, uint32(len(frame))), frame...))
			b.shb() // a new section forgets the interfaces
			b.idb(layers.LinkTypeEthernet, 20, b.opt(nil, ngOptIfTSResol, []byte{3}))
			b.epb(0, 2500, frame[:20], len(frame), b.opt(b.opt(nil, ngOptComment, []byte("hi")), ngOptEnd, nil))

			r, recs := readAll(t, b.Bytes())
			assert.Equal(t, layers.LinkTypeEthernet, r.LinkType())
			require.Len(t, recs, 4)
			assert.Equal(t, Record{Data: frame, Time: time.Unix(1, 500_000_000).UTC(), Length: len(frame),
				LinkType: layers.LinkTypeEthernet, Direction: Inbound}, recs[0])
			assert.Equal(t, Record{Data: frame[14:], Time: time.Unix(103, 500_000_000).UTC(), Length: len(frame) - 14,
				LinkType: layers.LinkTypeRaw, Interface: 1}, recs[1])
			assert.Equal(t, Record{Data: frame, Length: len(frame), LinkType: layers.LinkTypeEthernet}, recs[2])
			assert.Equal(t, Record{Data: frame[:20], Time: time.Unix(2, 500_000_000).UTC(), Length: len(frame),
				LinkType: layers.LinkTypeEthernet, Comment: "hi"}, recs[3])
		})
	}
}

// Every bundled capture reads the same through our Reader as through
// pcapgo.
func TestReaderVectors(t *testing.T) {
	for name, frames := range vectorFrames(t) {
		b, err := readFile(name)
		require.NoError(t, err)
		r, recs := readAll(t, b)
		assert.Equal(t, FormatPCAP, r.Format())
		require.Len(t, recs, len(frames), name)
		for i := range frames {
			assert.Equal(t, frames[i], recs[i].Data)
		}
	}
}

// Damaged files give errors, not panics or hangs.
func TestReaderErrors(t *testing.T) {
	var good bytes.Buffer
	w, err := NewWriter(&good, WriterOptions{})
	require.NoError(t, err)
	require.NoError(t, w.WriteFrameComment(t0, Inbound, make([]byte, 60), "x"))
	require.NoError(t, w.Close())
	g := good.Bytes()

	_, err = NewReader(bytes.NewReader(nil))
	assert.Error(t, err)
	_, err = NewReader(bytes.NewReader([]byte("not a capture file at all")))
	assert.Error(t, err)
	for cut := 1; cut < len(g); cut++ {
		r, err := NewReader(bytes.NewReader(g[:cut]))
		if err != nil {
			continue
		}
		_, err = r.Next()
		assert.Error(t, err, "cut at %d", cut)
	}
	bad := append([]byte(nil), g...)
	bad[len(bad)-1] ^= 0xFF // trailing block length mismatch
	r, err := NewReader(bytes.NewReader(bad))
	require.NoError(t, err)
	_, err = r.Next()
	assert.ErrorIs(t, err, errNgFormat)
}
