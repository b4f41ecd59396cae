package pcap

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime"
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// classicFile is a classic pcap file (little-endian, microseconds) with
// the given snapshot length and records, each a header that states
// capLen and origLen followed by data (which may be shorter: a lie).
func classicFile(snap uint32, recs ...classicRec) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, 0xa1b2c3d4)
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 4)
	b = le.AppendUint64(b, 0) // thiszone, sigfigs
	b = le.AppendUint32(b, snap)
	b = le.AppendUint32(b, uint32(layers.LinkTypeEthernet))
	for _, r := range recs {
		b = le.AppendUint64(b, 0) // ts_sec, ts_usec
		b = le.AppendUint32(b, r.capLen)
		b = le.AppendUint32(b, r.origLen)
		b = append(b, r.data...)
	}
	return b
}

type classicRec struct {
	capLen, origLen uint32
	data            []byte
}

// rawBlock is a pcapng block header that states length n, followed by
// body, whatever n says.
func rawBlock(o byteOrder, typ, n uint32, body []byte) []byte {
	b := o.AppendUint32(nil, typ)
	b = o.AppendUint32(b, n)
	return append(b, body...)
}

// ngHeader is a pcapng section header and one Ethernet interface with
// snapshot length snap.
func ngHeader(snap uint32) *ngBuilder {
	b := &ngBuilder{o: binary.LittleEndian}
	b.shb()
	b.idb(layers.LinkTypeEthernet, snap, nil)
	return b
}

// epbClaiming is an Enhanced Packet Block whose captured length says
// capLen but which holds only data.
func epbClaiming(capLen uint32, data []byte) []byte {
	le := binary.LittleEndian
	body := le.AppendUint32(nil, 0) // interface
	body = le.AppendUint64(body, 0) // timestamp
	body = le.AppendUint32(body, capLen)
	body = le.AppendUint32(body, capLen)
	body = append(body, data...)
	n := uint32(12 + len(body))
	b := rawBlock(le, ngBlockEPB, n, body)
	return le.AppendUint32(b, n)
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// hostileCaptures are files whose lengths lie, each with what reading
// its first record must say.
func hostileCaptures() []struct {
	name string
	file []byte
	want string
} {
	frame := make([]byte, 60)
	le := binary.LittleEndian
	huge := ngHeader(0)
	huge.Write(rawBlock(le, ngBlockEPB, 16<<20-4, make([]byte, 64))) // 16 MiB claimed, 64 bytes there
	overSnap := ngHeader(64)
	overSnap.Write(epbClaiming(100, make([]byte, 100)))
	overMax := ngHeader(0)
	overMax.Write(rawBlock(le, ngBlockEPB, ngMaxBlock+4, nil))
	unknown := ngHeader(0)
	unknown.Write(rawBlock(le, 0x0BAD, 0xFFFFFFFC, make([]byte, 64))) // skipped: the file ends first
	return []struct {
		name string
		file []byte
		want string
	}{
		{"pcap: a 4 GiB record, the snaplen says 4 GiB too", classicFile(0xFFFFFFFF, classicRec{0xFFFFFFFF, 0xFFFFFFFF, frame}),
			"a record claims 4294967295 captured bytes, more than the 262144 bytes this reader accepts"},
		{"pcap: a record past the file's snaplen", classicFile(1500, classicRec{1501, 1501, make([]byte, 1501)}),
			"a record claims 1501 captured bytes, more than the file's snapshot length (1500)"},
		{"pcap: a 4 GiB record, snaplen 0", classicFile(0, classicRec{0xFFFFFFFF, 0xFFFFFFFF, frame}),
			"more than the 262144 bytes this reader accepts"},
		{"pcapng: a 16 MiB packet block", huge.Bytes(), "claims 16777212 bytes, more than the 327712 this reader accepts"},
		{"pcapng: a packet block just past the bound", overMax.Bytes(), "more than the 327712 this reader accepts"},
		{"pcapng: a packet past its interface's snaplen", overSnap.Bytes(), "claims 100 captured bytes, more than its interface's snapshot length (64)"},
		{"pcapng: a 4 GiB block of an unknown type", unknown.Bytes(), io.ErrUnexpectedEOF.Error()},
	}
}

// A file that claims a huge record costs an error, not the memory it
// claims: the claim is checked before anything is allocated.
func TestReaderRefusesHugeRecords(t *testing.T) {
	for _, tc := range hostileCaptures() {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() {
				var r *Reader
				if r, err = NewReader(bytes.NewReader(tc.file)); err == nil {
					_, err = r.Next()
				}
			})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Less(t, n, uint64(1<<20), "bytes allocated to read a record that claims more than there is")
		})
	}
}

// Records up to the bound read, in both formats; a block the reader does
// not decode is skipped without being kept, however long.
func TestReaderBoundary(t *testing.T) {
	frame := make([]byte, MaxRecordLen)
	frame[MaxRecordLen-1] = 0xAB
	r, recs := readAll(t, classicFile(MaxRecordLen, classicRec{MaxRecordLen, MaxRecordLen, frame}))
	require.Len(t, recs, 1)
	assert.Equal(t, frame, recs[0].Data)
	assert.Equal(t, FormatPCAP, r.Format())

	b := ngHeader(MaxRecordLen)
	b.epb(0, 0, frame, len(frame), nil)
	_, recs = readAll(t, b.Bytes())
	require.Len(t, recs, 1)
	assert.Equal(t, frame, recs[0].Data)

	b = ngHeader(0)
	b.block(0x0BAD, make([]byte, 4<<20)) // four times what a decoded block may be
	b.epb(0, 0, frame[:60], 60, nil)
	file := b.Bytes()
	n := allocated(func() {
		rd, err := NewReader(bytes.NewReader(file))
		require.NoError(t, err)
		rec, err := rd.Next()
		require.NoError(t, err)
		assert.Len(t, rec.Data, 60)
		_, err = rd.Next()
		assert.ErrorIs(t, err, io.EOF)
	})
	assert.Less(t, n, uint64(1<<20), "bytes allocated to skip a 4 MiB block")
}

// FuzzReaderPCAP and FuzzReaderPCAPNG: arbitrary bytes never panic the
// reader, never hang it, and never give a record longer than
// MaxRecordLen. The seeds are good files of each format and the hostile
// ones above.
func FuzzReaderPCAP(f *testing.F) {
	var good bytes.Buffer
	w, _ := NewWriter(&good, WriterOptions{Format: FormatPCAP})
	_ = w.WriteFrame(t0, Inbound, make([]byte, 60))
	_ = w.Close()
	f.Add(good.Bytes())
	f.Add(classicFile(0, classicRec{60, 60, make([]byte, 60)}))
	fuzzReader(f, FormatPCAP)
}

func FuzzReaderPCAPNG(f *testing.F) {
	var good bytes.Buffer
	w, _ := NewWriter(&good, WriterOptions{})
	_ = w.WriteFrameComment(t0, Inbound, make([]byte, 60), "x")
	_ = w.Close()
	f.Add(good.Bytes())
	b := ngHeader(0)
	b.block(ngBlockSPB, append(binary.LittleEndian.AppendUint32(nil, 60), make([]byte, 60)...))
	b.epb(0, 0, make([]byte, 60), 60, b.opt(nil, ngOptComment, []byte("c")))
	f.Add(b.Bytes())
	fuzzReader(f, FormatPCAPNG)
}

// fuzzReader adds the hostile captures of format to f's seeds and fuzzes.
func fuzzReader(f *testing.F, format Format) {
	for _, tc := range hostileCaptures() {
		if r, err := NewReader(bytes.NewReader(tc.file)); err == nil && r.Format() == format {
			f.Add(tc.file)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		for range 100 {
			rec, err := r.Next()
			if err != nil {
				return
			}
			if len(rec.Data) > MaxRecordLen {
				t.Fatalf("a record of %d bytes, more than MaxRecordLen", len(rec.Data))
			}
		}
	})
}
