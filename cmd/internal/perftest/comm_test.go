package perftest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/device"
)

// rxeRecord is the client's record of conformance/testdata/rxe/write_bw.pcap
// (perftest 6.06 on rxe), as it crossed the wire: 107 characters and a NUL.
const rxeRecord = "0000:0001:000015:d6fab0:00000642:0000555e22f57000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:\x00"

func TestDestRecord(t *testing.T) {
	d, err := parseDest([]byte(rxeRecord), true)
	require.NoError(t, err)
	want := dest{
		outReads: 1, qpn: 0x15, psn: 0xd6fab0, rkey: 0x642, vaddr: 0x555e22f57000,
		gid: device.GIDFromAddr(netip.MustParseAddr("198.18.0.12")),
	}
	assert.Equal(t, want, d)
	assert.Equal(t, []byte(rxeRecord), d.marshal(true), "the record goes back out byte for byte")
	assert.Len(t, d.marshal(true), recordLenGID)

	// Without a GID: 58 characters and the NUL.
	short := d.marshal(false)
	assert.Equal(t, "0000:0001:000015:d6fab0:00000642:0000555e22f57000:00000000\x00", string(short))
	back, err := parseDest(short, false)
	require.NoError(t, err)
	want.gid = device.GID{}
	assert.Equal(t, want, back)

	// The widest values still fit.
	max := dest{lid: 0xffff, outReads: 0xffff, qpn: 0xffffff, psn: 0xffffff, rkey: 0xffffffff, vaddr: math.MaxUint64, srqn: 0xffffffff}
	for i := range max.gid {
		max.gid[i] = 0xff
	}
	b := max.marshal(true)
	require.Len(t, b, recordLenGID)
	assert.Equal(t, byte(0), b[recordLenGID-1])
	back, err = parseDest(b, true)
	require.NoError(t, err)
	assert.Equal(t, max, back)
}

// A hostile peer's record is refused, never half-read.
func TestParseDestHostile(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  string
	}{
		{"empty", ""},
		{"all NUL", string(make([]byte, recordLenGID))},
		{"field missing", "0000:0001:000015:d6fab0:00000642:0000555e22f57000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:00000000:"},
		{"field too many", "0000:0001:000015:d6fab0:00000642:0000555e22f57000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00:00000000:"},
		{"not hex", "0000:0001:0000zz:d6fab0:00000642:0000555e22f57000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:"},
		{"QPN above 24 bits", "0000:0001:1000000:d6fab0:00000642:0000555e22f5700:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:"},
		{"GID byte above 8 bits", "0000:0001:000015:d6fab0:00000642:0000555e22f57000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:100:0000000:"},
		{"trailing garbage", "0000:0001:000015:d6fab0:00000642:0000555e22f57000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:x"},
		{"negative", "0000:0001:-00015:d6fab0:00000642:0000555e22f57000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDest([]byte(tc.rec), true)
			assert.ErrorIs(t, err, errRecord)
		})
	}
	_, err := parseDest([]byte(rxeRecord), false)
	assert.ErrorIs(t, err, errRecord, "a record with a GID where one without is due")
}

func TestAtof(t *testing.T) {
	for in, want := range map[string]float64{
		"6.06": 6.06, "5.70": 5.7, "5.1": 5.1, "6.29": 6.29, "4": 4, "": 0, "x": 0, "5.33a": 5.33, "5.": 5, "1.2.3": 1.2,
	} {
		assert.Equal(t, want, atof(in), in)
	}
}

// pipePair is a comm of each side over an in-memory connection.
func pipePair(t *testing.T) (client, server *comm) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &comm{conn: a, client: true, timeout: 10 * time.Second, withGID: true},
		&comm{conn: b, timeout: 10 * time.Second, withGID: true}
}

// TestExchangesWire checks every exchange's bytes against what perftest
// sends, the peer played by hand on the other end of a pipe.
func TestExchangesWire(t *testing.T) {
	t.Run("versions", func(t *testing.T) {
		c, peer := pipePair(t)
		done := make(chan string, 1)
		go func() {
			v, _ := c.versions(Version)
			done <- v
		}()
		got := make([]byte, 16)
		_, err := io.ReadFull(peer.conn, got)
		require.NoError(t, err)
		assert.Equal(t, append([]byte("6.06"), make([]byte, 12)...), got)
		_, err = peer.conn.Write(append([]byte("6.29"), make([]byte, 12)...))
		require.NoError(t, err)
		assert.Equal(t, "6.29", <-done)
	})
	t.Run("system data", func(t *testing.T) {
		c, peer := pipePair(t)
		type res struct{ cycle, cl int }
		done := make(chan res, 1)
		go func() {
			a, b, _ := peer.sysData(8192, 32)
			done <- res{a, b}
		}()
		cycle, cl, err := c.sysData(4096, 64)
		require.NoError(t, err)
		assert.Equal(t, 8192, cycle, "both take the larger")
		assert.Equal(t, 64, cl)
		assert.Equal(t, res{8192, 64}, <-done)
	})
	t.Run("system data bytes", func(t *testing.T) {
		c, peer := pipePair(t)
		go c.sysData(4096, 64)
		var b [4]byte
		for _, want := range []uint32{4096, 64} {
			_, err := io.ReadFull(peer.conn, b[:])
			require.NoError(t, err)
			assert.Equal(t, want, binary.BigEndian.Uint32(b[:]))
			_, err = peer.conn.Write(b[:])
			require.NoError(t, err)
		}
	})
	t.Run("MTU", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			mine      int
			remVer    float64
			theirs    []byte
			want      int
			wantBytes []byte
		}{
			{"smaller wins", 5, 6.06, []byte("3\x00"), 3, []byte("5\x00")},
			{"ours smaller", 3, 6.06, []byte("5\x00"), 3, []byte("3\x00")},
			{"old peer: 4 bytes", 5, 5.2, []byte("2\x00\x00\x00"), 2, []byte("5\x00\x00\x00")},
			{"garbage ignored", 3, 6.06, []byte("9\x00"), 3, []byte("3\x00")},
			{"zero ignored", 3, 6.06, []byte("0\x00"), 3, []byte("3\x00")},
			{"not a number", 3, 6.06, []byte("x\x00"), 3, []byte("3\x00")},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c, peer := pipePair(t)
				done := make(chan int, 1)
				go func() {
					m, _ := c.mtu(tc.mine, tc.remVer)
					done <- m
				}()
				got := make([]byte, len(tc.wantBytes))
				_, err := io.ReadFull(peer.conn, got)
				require.NoError(t, err)
				assert.Equal(t, tc.wantBytes, got)
				_, err = peer.conn.Write(tc.theirs)
				require.NoError(t, err)
				assert.Equal(t, tc.want, <-done)
			})
		}
	})
	t.Run("BW reports", func(t *testing.T) {
		for _, remVer := range []float64{6.06, 5.32} {
			c, peer := pipePair(t)
			mine := bwReport{size: 4096, iters: 5, bwPeak: 3.79, bwAvg: 2.97, msgRate: 0.000759}
			theirs := bwReport{size: 65536, iters: 1000, bwPeak: 1, bwAvg: 2, msgRate: 3}
			done := make(chan bwReport, 1)
			go func() {
				r, _ := c.bwReports(&mine, remVer)
				done <- r
			}()
			itersLen := 8
			if remVer < 5.33 {
				itersLen = 4
			}
			be := func(v uint64, n int) []byte {
				b := binary.BigEndian.AppendUint64(nil, v)
				return b[8-n:]
			}
			for _, f := range []struct{ mine, theirs []byte }{
				{be(4096, 8), be(65536, 8)},
				{be(5, itersLen), be(1000, itersLen)},
				{be(math.Float64bits(3.79), 8), be(math.Float64bits(1), 8)},
				{be(math.Float64bits(2.97), 8), be(math.Float64bits(2), 8)},
				{be(math.Float64bits(0.000759), 8), be(math.Float64bits(3), 8)},
			} {
				got := make([]byte, len(f.mine))
				_, err := io.ReadFull(peer.conn, got)
				require.NoError(t, err)
				assert.Equal(t, f.mine, got)
				_, err = peer.conn.Write(f.theirs)
				require.NoError(t, err)
			}
			assert.Equal(t, theirs, <-done)
		}
	})
	t.Run("hand-shake and done", func(t *testing.T) {
		c, peer := pipePair(t)
		my := dest{qpn: 0x11, psn: 0x123456, rkey: 7, vaddr: 0x1000, outReads: 1}
		done := make(chan error, 1)
		go func() {
			d, err := c.handshake(&my)
			if err == nil && d.qpn != 0x15 {
				err = io.ErrUnexpectedEOF
			}
			if err == nil {
				err = c.done()
			}
			done <- err
		}()
		got := make([]byte, recordLenGID)
		_, err := io.ReadFull(peer.conn, got)
		require.NoError(t, err)
		assert.Equal(t, my.marshal(true), got)
		_, err = peer.conn.Write([]byte(rxeRecord))
		require.NoError(t, err)
		fin := make([]byte, 5)
		_, err = io.ReadFull(peer.conn, fin)
		require.NoError(t, err)
		assert.Equal(t, []byte("done\x00"), fin)
		require.NoError(t, <-done)
	})
	t.Run("peer closes", func(t *testing.T) {
		c, peer := pipePair(t)
		go func() {
			b := make([]byte, recordLenGID)
			io.ReadFull(peer.conn, b)
			peer.conn.Write(b[:50])
			peer.conn.Close()
		}()
		_, err := c.handshake(&dest{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the peer closed the connection")
	})
	t.Run("server reads first", func(t *testing.T) {
		_, s := pipePair(t)
		s.timeout = 50 * time.Millisecond
		_, err := s.handshake(&dest{})
		require.Error(t, err, "a server that hears nothing times out before it writes")
		assert.True(t, bytes.Contains([]byte(err.Error()), []byte("Couldn't read")), err.Error())
	})
}

// The rdma_cm channel's record is struct pingpong_dest, big-endian field
// by field (rdma_write_keys with HAVE_ENDIAN): 56 bytes.
func TestDestRecordCM(t *testing.T) {
	d := dest{outReads: 1, qpn: 0x15, psn: 0xd6fab0, rkey: 0x642, vaddr: 0x555e22f57000,
		gid: device.GIDFromAddr(netip.MustParseAddr("198.18.0.12")), srqn: 7}
	b := d.marshalCM()
	want := "00000000" + "00000001" + "00000015" + "00d6fab0" + "00000642" + "00000000" + "0000555e22f57000" +
		"00000000000000000000ffffc612000c" + "00000007" + "00000000"
	assert.Equal(t, want, fmt.Sprintf("%x", b))
	back, err := parseDestCM(b)
	require.NoError(t, err)
	assert.Equal(t, d, back)

	// What no perftest sends is refused.
	for _, tc := range []struct {
		name string
		off  int
		val  uint32
	}{{"QPN above 24 bits", 8, 0x1000000}, {"PSN above 24 bits", 12, 0x1000000}, {"LID above 16 bits", 0, 0x10000}, {"negative out_reads", 4, 0xffffffff}} {
		bad := append([]byte(nil), b...)
		binary.BigEndian.PutUint32(bad[tc.off:], tc.val)
		_, err := parseDestCM(bad)
		assert.ErrorIs(t, err, errRecord, tc.name)
	}
	_, err = parseDestCM(b[:55])
	assert.ErrorIs(t, err, errRecord, "short")
}
