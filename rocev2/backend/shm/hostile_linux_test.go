package shm

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/goroce/goroce/rocev2/backend"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// eventually waits, without sleeping, for what another goroutine of the
// backend does next (a teardown); the deadline is a hang guard only.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		runtime.Gosched()
	}
}

// pairedBackends opens a and b in one run directory and pairs them with one
// packet from a to b.
func pairedBackends(t testing.TB, cfg Config) (a, b *Backend) {
	t.Helper()
	dir := runDir(t)
	a = openIn(t, dir, "127.0.0.1:4791", cfg)
	b = openIn(t, dir, "127.0.0.2:4791", cfg)
	require.NoError(t, a.Send([]backend.Outgoing{{Buf: packet(64, 1), Dst: b.LocalAddr()}}))
	receiveN(t, b, 1)
	return a, b
}

// pairingOf returns b's one pairing.
func pairingOf(t testing.TB, b *Backend) *pairing {
	t.Helper()
	b.rxMu.Lock()
	defer b.rxMu.Unlock()
	for _, pr := range b.slots {
		if pr != nil {
			return pr
		}
	}
	t.Fatal("no pairing")
	return nil
}

const testRing = 64 << 10

// A peer that breaks a ring's rules loses the pairing: the side that finds
// it counts it, both sides tear down, and nothing after is read from it.
func TestCorruptRingEndsPairing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// scribble writes what the peer (a) lies with into the ring b
		// reads (in) or the one it writes (out).
		scribble func(in, out []byte)
		// send makes b look: receive what a sent, or send until it reads
		// the head a lied about.
		send bool
	}{
		{"a tail beyond the ring", func(in, _ []byte) { binary.LittleEndian.PutUint64(in[offTail:], 1<<40) }, false},
		{"a record longer than any packet", func(in, _ []byte) {
			tail := binary.LittleEndian.Uint64(in[offTail:])
			pos := ringHeaderSize + int(tail%testRing)
			binary.LittleEndian.PutUint32(in[pos:], maxPacket+1)
			binary.LittleEndian.PutUint64(in[offTail:], tail+recordLen(maxPacket+1))
		}, false},
		{"a pad that skips what was not written", func(in, _ []byte) {
			tail := binary.LittleEndian.Uint64(in[offTail:])
			pos := ringHeaderSize + int(tail%testRing)
			binary.LittleEndian.PutUint32(in[pos:], padLen)
			binary.LittleEndian.PutUint64(in[offTail:], tail+8)
		}, false},
		{"a head beyond what was written", func(_, out []byte) { binary.LittleEndian.PutUint64(out[offHead:], 1<<40) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pairedBackends(t, Config{RingSize: testRing})
			// The rings are mapped in both processes; a's view of b's ring
			// and b's of a's are the same pages, so writing through b's
			// mappings is what a hostile a would do.
			pr := pairingOf(t, b)
			tc.scribble(pr.inMem, pr.outMem)
			if tc.send {
				big := packet(4000, 2)
				for range 64 { // more than the ring holds: b reads the head
					require.NoError(t, b.Send([]backend.Outgoing{{Buf: big, Dst: a.LocalAddr()}}))
				}
			} else {
				b.TryReceive(make([]backend.Incoming, 4))
			}
			eventually(t, "both sides tear the pairing down", func() bool { return a.Stats().Paired == 0 && b.Stats().Paired == 0 })
			assert.EqualValues(t, 1, b.Stats().CorruptRings)
			assert.Equal(t, LinkNone, b.LinkTo(a.LocalAddr()))
			assert.Equal(t, LinkNone, a.LinkTo(b.LocalAddr()))
			n, err := b.TryReceive(make([]backend.Incoming, 4))
			assert.NoError(t, err)
			assert.Zero(t, n)
		})
	}
}

// A packet the peer changes after publishing it arrives with a bad ICRC,
// and the device will drop it; the pairing stays.
func TestScribbledPacketFailsICRC(t *testing.T) {
	a, b := pairedBackends(t, Config{})
	pr := pairingOf(t, b)
	pkt := packet(200, 3)
	require.NoError(t, a.Send([]backend.Outgoing{{Buf: pkt, Dst: b.LocalAddr()}}))
	tail := binary.LittleEndian.Uint64(pr.inMem[offTail:])
	pr.inMem[ringHeaderSize+int(tail-recordLen(200))%DefaultRingSize+recHeader+20] ^= 0x40
	got := make([]backend.Incoming, 4)
	n, err := b.TryReceive(got)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.Equal(t, backend.ICRCBad, got[0].ICRC)
	assert.EqualValues(t, 1, b.Stats().BadICRC)
	assert.EqualValues(t, 1, b.Stats().Paired)
}
