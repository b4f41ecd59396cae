package afpacket

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// TestRingHostileBlocks feeds the backend's ring blocks that lie: each bad
// one is counted and skipped from the record that lies, every block goes
// back to the kernel, and the good frames around them arrive intact.
func TestRingHostileBlocks(t *testing.T) {
	local, peer := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	b, _, _ := OpenFake(t, local, peer)
	t.Cleanup(func() { b.Close() })
	ring := UseFakeRing(b, 4096, 4)

	frame := func(id uint16, payload string) []byte {
		pkt, err := (&rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11}).Append(nil, []byte(payload))
		require.NoError(t, err)
		return Frame(local, peer, 0xC000, id, pkt)
	}
	good := func(id uint16) ringRec { return ringRec{frame: frame(id, "good")} }

	ring.Put(0, [][]byte{frame(1, "good"), frame(2, "good")})
	putBlock(ring.Block(1), []ringRec{good(3)})
	binary.NativeEndian.PutUint32(ring.Block(1)[blockNumOff:], 1<<20) // a count no block holds
	ring.HandOver(1)
	putBlock(ring.Block(2), []ringRec{good(4), {frame: frame(5, "lies"), lie: put32(tp3SnaplenOff, 1<<16)}, good(6)})
	ring.HandOver(2)

	pkts := make([]backend.Incoming, 16)
	n, err := b.TryReceive(pkts)
	require.NoError(t, err)
	var ids []uint16
	for _, d := range pkts[:n] {
		require.Zero(t, d.Drop)
		assert.Equal(t, backend.ICRCVerified, d.ICRC)
		ids = append(ids, d.IPv4ID)
	}
	assert.Equal(t, []uint16{1, 2, 4}, ids, "the frames before a lie, none after it")
	assert.Equal(t, uint64(2), b.Stats().BadBlocks)
	for i := range 3 {
		assert.True(t, ring.Returned(i), "block %d back to the kernel", i)
	}

	n, err = b.TryReceive(pkts)
	require.NoError(t, err)
	assert.Zero(t, n, "block 3 is still the kernel's")

	// A frame the kernel cut (longer than a block) is dropped, never
	// passed on shortened; the ring then wraps to block 0.
	putBlock(ring.Block(3), []ringRec{{frame: frame(7, "cut"), lie: put32(tp3LenOff, 70000)}, good(8)})
	ring.HandOver(3)
	ring.Put(0, [][]byte{frame(9, "wrapped")})
	n, err = b.TryReceive(pkts)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	assert.Equal(t, rocev2.ErrDatagram, pkts[0].Drop)
	assert.Equal(t, uint16(8), pkts[1].IPv4ID)
	assert.Equal(t, uint16(9), pkts[2].IPv4ID)
	assert.True(t, ring.Returned(3) && ring.Returned(0))
}

// TestRingPartialBlock: a batch smaller than a block takes the block in
// several calls, and gives it back with its last record.
func TestRingPartialBlock(t *testing.T) {
	local, peer := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	b, _, _ := OpenFake(t, local, peer)
	t.Cleanup(func() { b.Close() })
	ring := UseFakeRing(b, 4096, 2)
	pkt, err := (&rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11}).Append(nil, []byte("x"))
	require.NoError(t, err)
	ring.Put(0, [][]byte{Frame(local, peer, 1, 1, pkt), Frame(local, peer, 1, 2, pkt), Frame(local, peer, 1, 3, pkt)})

	pkts := make([]backend.Incoming, 2)
	n, err := b.TryReceive(pkts)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	assert.False(t, ring.Returned(0), "one record left")
	// Serve drains at once: the block being walked still has a record.
	got := make(chan int, 1)
	served := make(chan error, 1)
	go func() {
		first := true
		served <- b.Serve(func() bool {
			if first {
				first = false
				k, err := b.TryReceive(pkts)
				if err != nil {
					k = -1
				}
				got <- k
			}
			return false
		})
	}()
	require.Equal(t, 1, <-got)
	assert.Equal(t, uint16(3), pkts[0].IPv4ID)
	assert.True(t, ring.Returned(0))

	require.NoError(t, b.Close())
	require.ErrorIs(t, <-served, backend.ErrBackendClosed)
	_, err = b.TryReceive(pkts)
	require.ErrorIs(t, err, backend.ErrBackendClosed)
}

func TestParseReceiveMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ReceiveMode
		err  bool
	}{{"", ReceiveMmsg, false}, {"mmsg", ReceiveMmsg, false}, {"ring", ReceiveRing, false}, {"tpacket", 0, true}} {
		got, err := ParseReceiveMode(tc.in)
		if tc.err {
			assert.ErrorContains(t, err, "use mmsg", "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
		assert.Equal(t, tc.want, must(ParseReceiveMode(got.String())), "String parses back")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestRingRequest: the defaults make a ring the kernel takes (whole pages,
// frames dividing the block), and the retire timeout is rounded up to
// whole milliseconds, never 0 (which would ask the kernel for its own).
func TestRingRequest(t *testing.T) {
	req, err := ringRequest(Config{}.withDefaults().Ring)
	require.NoError(t, err)
	assert.Equal(t, uint32(DefaultRingBlockSize), req.Block_size)
	assert.Equal(t, uint32(DefaultRingBlocks), req.Block_nr)
	assert.Zero(t, req.Block_size%req.Frame_size)
	assert.Equal(t, req.Block_size/req.Frame_size*req.Block_nr, req.Frame_nr)
	assert.Equal(t, uint32(1), req.Retire_blk_tov)

	req, err = ringRequest(RingConfig{BlockSize: 1 << 16, Blocks: 2, Retire: 1500 * time.Microsecond})
	require.NoError(t, err)
	assert.Equal(t, uint32(2), req.Retire_blk_tov)
}
